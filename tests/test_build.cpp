#include <gtest/gtest.h>
#include "engine/vulkan/shaders.h"
TEST(Build, ShaderTableLinks) { EXPECT_EQ(vkmoe::find_shader("no-such-shader"), nullptr); }
