#pragma once
// The shared test fixtures (../shared/fixtures beside the repository, or
// $VKMOE_FIXTURES): vocabularies with test vectors, real chat templates.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace vkmoe::test {

// The fixtures subfolder `sub` ("vocab", "chat-templates"), or empty when there is none.
inline std::filesystem::path fixtures_dir(const std::string& sub) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto is_dir = [&](const fs::path& p) { return fs::is_directory(p, ec); };
  if (const char* env = std::getenv("VKMOE_FIXTURES"); env && *env) {
    const fs::path p(env);
    return is_dir(p / sub) ? p / sub : is_dir(p) ? p : fs::path();
  }
  std::vector<fs::path> roots;  // candidate repository roots
  if (fs::path(__FILE__).is_absolute()) roots.push_back(fs::path(__FILE__).parent_path().parent_path());
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) roots.push_back(exe.parent_path().parent_path());  // build-x/vkmoe_tests
  const fs::path cwd = fs::current_path(ec);
  if (!ec) roots.push_back(cwd), roots.push_back(cwd.parent_path());
  for (const fs::path& r : roots) {
    const fs::path p = r / ".." / "shared" / "fixtures" / sub;
    if (is_dir(p)) return fs::weakly_canonical(p, ec);
  }
  return {};
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace vkmoe::test
