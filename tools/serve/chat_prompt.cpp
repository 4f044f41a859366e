#include "tools/serve/chat_prompt.h"

#include "tools/serve/api_error.h"

namespace vkmoe::serve {

std::string ChatPrompt::render(const nlohmann::json& messages, bool add_generation_prompt,
                               const nlohmann::json& tools) const {
  try {
    return fmt_.render(messages, add_generation_prompt, tools);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw ApiError(400, std::string("the chat template failed: ") + e.what(), "template_error", "messages");
  }
}

}  // namespace vkmoe::serve
