// The one translation unit that compiles Boost.JSON (header-only mode, see CMakeLists.txt),
// so that sanitizer builds instrument it too and no other file pays for its implementation.
#include <boost/json/src.hpp>
