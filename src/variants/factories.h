// One factory per variant file; the registry lists them in story order.
#pragma once

#include <memory>

#include "attnprof/variant.h"

namespace attnprof {
std::unique_ptr<Variant> make_naive();
std::unique_ptr<Variant> make_inplace();
std::unique_ptr<Variant> make_sdpa_math();
std::unique_ptr<Variant> make_sdpa_efficient();
std::unique_ptr<Variant> make_sdpa_flash();
std::unique_ptr<Variant> make_sdpa_cudnn();
std::unique_ptr<Variant> make_sdpa_auto();
std::unique_ptr<Variant> make_custom_softmax();
std::unique_ptr<Variant> make_custom_flash();
std::unique_ptr<Variant> make_custom_flash_sm90();
std::unique_ptr<Variant> make_ring_sdpa_flash();
std::unique_ptr<Variant> make_ring_custom_flash();
std::unique_ptr<Variant> make_ring_custom_flash_sm90();
std::unique_ptr<Variant> make_ulysses_sdpa_flash();
std::unique_ptr<Variant> make_ulysses_custom_flash();
std::unique_ptr<Variant> make_ulysses_custom_flash_sm90();
}  // namespace attnprof
