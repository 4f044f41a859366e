#include "tools/cli_args.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/error.h"

namespace vkmoe {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string show(long long v) { return std::to_string(v); }
std::string show(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

template <class T>
T in_range(const std::string& option, const std::string& text, T v, T min, T max) {
  if (v < min) throw Error(option + " must be at least " + show(min) + ", got " + text);
  if (v > max) throw Error(option + " must be at most " + show(max) + ", got " + text);
  return v;
}

// from_chars over the whole text: false when it is not one number.
template <class T>
bool whole(const std::string& text, T& v, bool& out_of_range) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  out_of_range = ec == std::errc::result_out_of_range;
  return (ec == std::errc() || out_of_range) && p == end;
}

}  // namespace

std::string Args::get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

std::string Args::label(const std::string& name) const {
  auto it = labels_.find(name);
  return it == labels_.end() ? "--" + name : it->second;
}

long long Args::num(const std::string& name, long long def, long long min, long long max) const {
  return has(name) ? parse_int(label(name), get(name), min, max) : def;
}

double Args::real(const std::string& name, double def, double min, double max) const {
  return has(name) ? parse_real(label(name), get(name), min, max) : def;
}

Args parse_options(const std::string& cmd, const std::vector<OptionSpec>& spec, int argc, const char* const* argv) {
  std::vector<OptionSpec> all = spec;
  all.push_back({"help", "-h", true});
  Args a;
  for (const OptionSpec& o : all)
    a.labels_[o.name] = o.short_name.empty() ? "--" + o.name : o.short_name + "/--" + o.name;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string::npos;
    const std::string word = arg.substr(0, eq);
    auto o = std::find_if(all.begin(), all.end(),
                          [&](const OptionSpec& s) { return word == "--" + s.name || word == s.short_name; });
    if (o == all.end()) {
      if (arg.empty() || arg[0] != '-') throw Error("unexpected argument '" + arg + "' (see vkmoe --help)");
      std::string best;  // the closest spelling, if at most 2 edits and a third of the word away
      size_t best_d = std::min<size_t>(2, word.size() / 3) + 1;
      for (const OptionSpec& s : all)
        for (const std::string& n : {"--" + s.name, s.short_name})
          if (!n.empty() && edit_distance(word, n) < best_d) best_d = edit_distance(word, n), best = n;
      throw Error("unknown option '" + word + "' for " + cmd + (best.empty() ? "" : " (did you mean " + best + "?)"));
    }
    std::string& value = a.values_[o->name];
    if (o->flag) {
      if (eq != std::string::npos) throw Error("option " + word + " takes no value");
      value = "1";
    } else if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 >= argc) throw Error("option " + word + " needs a value");
      value = argv[++i];
    }
  }
  return a;
}

long long parse_int(const std::string& option, const std::string& text, long long min, long long max) {
  long long v = 0;
  bool overflow = false;
  if (!whole(text, v, overflow)) throw Error(option + " needs an integer, got '" + text + "'");
  if (overflow) v = text[0] == '-' ? LLONG_MIN : LLONG_MAX;
  return in_range(option, text, v, min, max);
}

double parse_real(const std::string& option, const std::string& text, double min, double max) {
  double v = 0;
  bool overflow = false;
  if (!whole(text, v, overflow)) throw Error(option + " needs a number, got '" + text + "'");
  if (overflow || !std::isfinite(v)) throw Error(option + " needs a finite number, got '" + text + "'");
  return in_range(option, text, v, min, max);
}

std::vector<int> parse_int_list(const std::string& option, const std::string& text, int min, int max) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    long long v = 0;
    bool overflow = false;
    if (!whole(item, v, overflow) || item.empty())
      throw Error(option + " needs comma-separated integers, got '" + text + "'");
    if (overflow) v = item[0] == '-' ? LLONG_MIN : LLONG_MAX;
    out.push_back(static_cast<int>(in_range<long long>(option, item, v, min, max)));
  }
  if (out.empty() || text.back() == ',') throw Error(option + " needs comma-separated integers, got '" + text + "'");
  return out;
}

}  // namespace vkmoe
