// The Prometheus text exposition format (version 0.0.4): HELP and TYPE lines, samples and
// histograms, appended to a string. Pure functions; every part that reports metrics uses them.
#pragma once

#include "deviceshadow/histogram.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace deviceshadow::prometheus {

std::string format_value(double v);
void append_header(std::string& out, const char* name, const char* type, const char* help);
// `labels` as Prometheus writes them inside the braces (name="value",…), or empty.
void append_sample(std::string& out, std::string_view name, std::string_view labels, const std::string& value);
void append_histogram(std::string& out, std::string_view name, std::string_view labels, const Histogram& h);
// One unlabelled sample with its HELP and TYPE lines.
void append_metric(std::string& out, const char* type, const char* name, const char* help, std::uint64_t value);

}  // namespace deviceshadow::prometheus
