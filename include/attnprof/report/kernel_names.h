// Short display names for device work, shared by the at-a-glance table and the
// forward timeline. Profiler kernel names carry full template arguments and
// parameter lists (hundreds of characters); tables and pictures need the symbol.
#pragma once

#include <string>
#include <string_view>

namespace attnprof::report {

// "void pytorch_flash::flash_fwd_kernel<...>(...)" -> "pytorch_flash::flash_fwd_kernel";
// "Memcpy DtoD (Device -> Device)" -> "Memcpy DtoD". Past `max_chars` the name
// is cut and ends in "...". A name that is all template/parameters stays whole.
std::string short_kernel_name(std::string_view name, size_t max_chars = 60);

// short_kernel_name without the namespaces: "flash_fwd_kernel",
// "vectorized_elementwise_kernel" (for labels inside a box of a few hundred px).
std::string kernel_symbol(std::string_view name, size_t max_chars = 60);

}  // namespace attnprof::report
