#include "tools/serve/serve_cmd.h"

#include "tools/command_setup.h"
#include "tools/serve/serve.h"

namespace vkmoe {

const std::vector<OptionSpec> kServeOptions = {{"host"}, {"port"}, {"max-body"}, {"max-queue"}};

int cmd_serve(const Args& a) {
  const ServeOptions o = serve_options(a);  // option errors before the model loads
  auto model = load_model(a);
  auto tok = Tokenizer::from_gguf(model->gguf());
  auto engine = make_engine(*model, engine_options(a, *model));
  print_startup_summary(*model, *engine);
  return run_server(*model, *engine, *tok, o);
}

}  // namespace vkmoe
