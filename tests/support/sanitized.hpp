// Whether this test binary runs under a sanitizer. Tests whose point is volume (many writers,
// a million random inputs) run fewer rounds there: a race or a bad access shows in a few hundred
// rounds, and the optimised build runs them all (.ci/run).
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// `full` rounds in the optimised build, a quarter of them under a sanitizer.
inline constexpr int scaled_for_sanitizers(int full) { return kSanitized ? full / 4 : full; }
