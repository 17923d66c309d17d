#include "deviceshadow/prometheus.hpp"

#include <cstdio>

namespace deviceshadow::prometheus {

std::string format_value(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void append_header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void append_sample(std::string& out, std::string_view name, std::string_view labels, const std::string& value) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  out += ' ';
  out += value;
  out += '\n';
}

void append_histogram(std::string& out, std::string_view name, std::string_view labels, const Histogram& h) {
  std::uint64_t cumulative = 0;
  std::string bucket = std::string(name) + "_bucket";
  std::string prefix = labels.empty() ? "" : std::string(labels) + ",";
  for (std::size_t i = 0; i <= h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    std::string le = i < h.bounds.size() ? format_value(h.bounds[i]) : "+Inf";
    append_sample(out, bucket, prefix + "le=\"" + le + "\"", std::to_string(cumulative));
  }
  append_sample(out, std::string(name) + "_sum", labels, format_value(h.sum));
  append_sample(out, std::string(name) + "_count", labels, std::to_string(h.count));
}


void append_metric(std::string& out, const char* type, const char* name, const char* help, std::uint64_t value) {
  append_header(out, name, type, help);
  append_sample(out, name, "", std::to_string(value));
}

}  // namespace deviceshadow::prometheus
