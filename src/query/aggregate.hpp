// Aggregation of fleet queries: count, min, max, sum, avg and exact percentiles of the shadows a
// filter matches, in groups by the values of some properties (docs/queries.md, "Aggregation").
#pragma once

#include "query/filter.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace deviceshadow::query {

struct Metric {
  enum class Kind { count, min, max, sum, avg, percentiles } kind = Kind::count;
  std::string label;
  Property property;              // all but count
  struct Percent {
    double value;      // in (0, 100]
    std::string text;  // as the request wrote it: its key in the answer
  };
  std::vector<Percent> percents;  // percentiles: each value once
};

// "count()", "min(prop)", "max(prop)", "sum(prop)", "avg(prop)" or
// "percentiles(prop,50,95,99)". Throws invalid_request naming metrics.<label>.
Metric parse_metric(std::string label, std::string_view text);

class Aggregation {
 public:
  // At most max_groups groups are answered, the largest; the others are summed up in "other".
  Aggregation(std::vector<Property> group_by, std::vector<Metric> metrics, std::size_t max_groups);
  ~Aggregation();

  void add(const Subject& subject);
  // {"groups":[{"key":{prop:value,…},<label>:…}],"other"?:{<label>:…}}: groups by count, largest first.
  std::string render() const;

 private:
  struct Group;
  std::vector<Property> group_by_;
  std::vector<Metric> metrics_;
  std::size_t max_groups_;
  std::map<std::string, Group> groups_;  // by the key's JSON
};

}  // namespace deviceshadow::query
