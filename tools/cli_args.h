#pragma once
// Command-line options of the vkmoe commands: each command declares the options
// it accepts; anything else is an error, and numbers are parsed strictly (the
// whole text, in range, finite). Every error is an Error naming the option.
#include <map>
#include <string>
#include <vector>

namespace vkmoe {

struct OptionSpec {
  std::string name;        // long name, without "--"
  std::string short_name;  // e.g. "-m", "-ub"; empty: none
  bool flag = false;       // takes no value
};

class Args {
 public:
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& def = "") const;
  // The value in [min, max], or def when the option is absent.
  long long num(const std::string& name, long long def, long long min, long long max) const;
  double real(const std::string& name, double def, double min, double max) const;
  // How messages spell the option: "-n/--n-predict", "--temp".
  std::string label(const std::string& name) const;

 private:
  friend Args parse_options(const std::string&, const std::vector<OptionSpec>&, int, const char* const*);
  std::map<std::string, std::string> values_, labels_;
};

// Parses argv[0..argc) ("--name value", "--name=value", "-m value", flags) for
// command `cmd`, which accepts `spec` and -h/--help. Throws Error for an unknown
// option (suggesting the closest known one), a missing value, a value given to
// a flag, or a stray argument; the last of repeated options wins.
Args parse_options(const std::string& cmd, const std::vector<OptionSpec>& spec, int argc, const char* const* argv);

// Strict numbers; errors name `option`.
long long parse_int(const std::string& option, const std::string& text, long long min, long long max);
double parse_real(const std::string& option, const std::string& text, double min, double max);
// "512,1024" -> {512, 1024}, each in [min, max].
std::vector<int> parse_int_list(const std::string& option, const std::string& text, int min, int max);

}  // namespace vkmoe
