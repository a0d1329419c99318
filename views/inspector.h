// inspector.h — the inspector window: everything about the selected node (op, dtype,
// shape, attributes, inputs and users as links, provenance, its line of text IR), or the
// selected composite, or, with nothing selected, a summary of the graph (inputs, outputs,
// op counts by category).
#pragma once
#include "core/rewrite/quant_info.h"
#include "views/app_state.h"
#include "views/theme.h"

namespace lathe::views {

// Inspector > Values: Run, then the selected node's min / max / mean / NaN count and a
// histogram (inspector_values.cpp).
void inspect_values(AppState& s, NodeRef n);

// Inspector > Quantization: the scale and zero point of the quantize / dequantize sites near
// n, and the error of the last quantize step (inspector_quant.cpp).
void inspect_quantization(AppState& s, NodeRef n);
// Those sites (core/rewrite/quant_info.h), kept for the graph version and node last asked.
const std::vector<QuantSite>& quant_sites(const AppState& s, NodeRef n);

void draw_inspector(AppState& s, const Fonts& fonts);

}  // namespace lathe::views
