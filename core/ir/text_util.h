// text_util.h — small text helpers shared by the printer and the parsers (.lathe text,
// rewrite patterns): UTF-8 validation and "did you mean" suggestions for op names.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace lathe {

// Bytes in the valid UTF-8 sequence starting at s[i] (1–4), or 0 if it is not valid
// (overlong forms, surrogates and code points past U+10FFFF are invalid).
size_t utf8_sequence_length(std::string_view s, size_t i);

// Levenshtein distance, ignoring ASCII case.
size_t edit_distance(std::string_view a, std::string_view b);

// The primitive op name closest to `name` if it is nearer than max_distance edits, else "".
std::string closest_op_name(std::string_view name, size_t max_distance);

}  // namespace lathe
