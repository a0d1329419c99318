// samples.cpp — the sample gallery and the bench workloads, built with the Tensor frontend.
#include "core/frontend/samples.h"

#include <functional>
#include <map>

#include "core/frontend/autodiff.h"
#include "core/frontend/nn.h"
#include "core/ir/diag.h"

namespace lathe {

namespace {

using Outputs = std::vector<std::pair<std::string, NodeRef>>;

Graph graph_of(const Outputs& outs) { return Graph::from_outputs(outs); }

Tensor dense(const Tensor& x, int64_t in, int64_t out, const std::string& name) {
  ProvenanceScope ps(name);
  Tensor w = input(name + ".w", {in, out});
  Tensor b = input(name + ".b", {out});
  return matmul(x, w) + b;
}

// ---- gallery ------------------------------------------------------------------------------

Graph mlp() {
  Tensor x = input("x", {32, 784});
  Tensor h = relu(dense(x, 784, 256, "fc1"));
  Tensor y = softmax(dense(h, 256, 10, "fc2"), -1);
  return graph_of({{"probs", y.node()}});
}

Graph convnet() {
  Tensor x = input("x", {8, 1, 28, 28});
  Conv2dOptions same;
  same.padding = {1, 1};
  Pool2dOptions pool;
  pool.kernel = {2, 2};
  Tensor h;
  {
    ProvenanceScope ps("conv1");
    h = max_pool2d(relu(conv2d(x, input("conv1.w", {8, 1, 3, 3}), input("conv1.b", {8}), same)), pool);
  }
  {
    ProvenanceScope ps("conv2");
    h = max_pool2d(relu(conv2d(h, input("conv2.w", {16, 8, 3, 3}), input("conv2.b", {16}), same)), pool);
  }
  Tensor logits = dense(flatten(h, 1), 16 * 7 * 7, 10, "fc");
  return graph_of({{"logits", logits.node()}});
}

Graph softmax_sample() {
  Tensor x = input("x", {64, 1000});
  return graph_of({{"y", softmax(x, -1).node()}});
}

Graph layernorm_sample() {
  Tensor x = input("x", {32, 128, 768});
  Tensor y = layer_norm(x, 1, input("weight", {768}), input("bias", {768}));
  return graph_of({{"y", y.node()}});
}

Graph attention_sample() {
  Shape s{2, 12, 128, 64};
  Tensor o = scaled_dot_product_attention(input("q", s), input("k", s), input("v", s), std::nullopt, true);
  return graph_of({{"out", o.node()}});
}

// GPT-2 small block, pre-LN: x + attn(ln_1(x)), then h + mlp(ln_2(h)); weights in GPT-2's
// Conv1D layout (x · W).
Tensor gpt2_block(const Tensor& x, int64_t d, int64_t heads) {
  ProvenanceScope ps("block0");
  auto ln = [&](const Tensor& t, const std::string& name) {
    ProvenanceScope s(name);
    return layer_norm(t, 1, input(name + ".w", {d}), input(name + ".b", {d}), 1e-5);
  };
  Tensor a;
  {
    ProvenanceScope s("attn");
    a = multi_head_attention(ln(x, "ln_1"), input("attn.c_attn.w", {d, 3 * d}), input("attn.c_attn.b", {3 * d}),
                             input("attn.c_proj.w", {d, d}), input("attn.c_proj.b", {d}), heads, true);
  }
  Tensor h = x + a;
  Tensor m;
  {
    ProvenanceScope s("mlp");
    Tensor f = gelu(dense(ln(h, "ln_2"), d, 4 * d, "mlp.c_fc"), "tanh");
    m = dense(f, 4 * d, d, "mlp.c_proj");
  }
  return h + m;
}

Graph gpt2_block_sample() {
  Tensor x = input("x", {1, 128, 768});
  return graph_of({{"y", gpt2_block(x, 768, 12).node()}});
}

Graph mlp_train_step() {
  Tensor x = input("x", {32, 784});
  Tensor labels = input("labels", {32}, DType::I64);
  Tensor w1 = input("fc1.w", {784, 128}), b1 = input("fc1.b", {128});
  Tensor w2 = input("fc2.w", {128, 10}), b2 = input("fc2.b", {10});
  Tensor logits;
  {
    ProvenanceScope ps("forward");
    Tensor h = relu(matmul(x, w1) + b1);
    logits = matmul(h, w2) + b2;
  }
  Tensor loss = cross_entropy(logits, labels);
  std::vector<Tensor> params{w1, b1, w2, b2};
  auto grads = grad(loss, params);
  auto updates = sgd_step(params, grads, 0.01);
  Outputs outs{{"loss", loss.node()}};
  const char* names[] = {"fc1.w", "fc1.b", "fc2.w", "fc2.b"};
  for (size_t i = 0; i < updates.size(); ++i) outs.push_back({std::string("new.") + names[i], updates[i].node()});
  return graph_of(outs);
}

// ---- bench workloads (SPEC.md "Benchmark suite") ---------------------------------------

Graph bench_eltwise() {
  Shape s{16 * 1024 * 1024};
  Tensor a = input("a", s), b = input("b", s), c = input("c", s);
  return graph_of({{"y", exp(relu(a * b + c) * 0.5).node()}});
}
Graph bench_softmax() { return graph_of({{"y", softmax(input("x", {4096, 4096}), -1).node()}}); }
Graph bench_layernorm() {
  Tensor y = layer_norm(input("x", {4096, 4096}), 1, input("weight", {4096}), input("bias", {4096}));
  return graph_of({{"y", y.node()}});
}
Graph bench_matmul() { return graph_of({{"c", matmul(input("a", {1024, 1024}), input("b", {1024, 1024})).node()}}); }
Graph bench_matmul_int8() {
  Tensor c = matmul_integer(input("a", {1024, 1024}, DType::U8), input("b", {1024, 1024}, DType::I8));
  return graph_of({{"c", c.node()}});
}
Graph bench_conv2d() {
  Conv2dOptions o;
  o.padding = {1, 1};
  return graph_of({{"y", conv2d(input("x", {8, 64, 56, 56}), input("w", {64, 64, 3, 3}), std::nullopt, o).node()}});
}
// MobileNet's inner layer: a depthwise 3x3 convolution, folded BatchNorm, ReLU6 (issue 12)
Graph bench_dwconv() {
  Conv2dOptions o;
  o.padding = {1, 1};
  o.groups = 144;
  Tensor y = conv2d(input("x", {8, 144, 56, 56}), input("w", {144, 1, 3, 3}), input("b", {144}), o);
  y = clamp(y * input("scale", {144, 1, 1}) + input("shift", {144, 1, 1}), Scalar(0.0), Scalar(6.0));
  return graph_of({{"y", y.node()}});
}
Graph bench_mlp() {
  Tensor x = input("x", {256, 1024});
  Tensor y = dense(gelu(dense(x, 1024, 4096, "fc1")), 4096, 1024, "fc2");
  return graph_of({{"y", y.node()}});
}

// Long-context causal attention (issue 17): the score matrix alone would be 805 MB.
Graph bench_attention_long() {
  Shape s{1, 12, 4096, 64};
  Tensor o = scaled_dot_product_attention(input("q", s), input("k", s), input("v", s), std::nullopt, true);
  return graph_of({{"out", o.node()}});
}

struct Entry {
  std::string name, description;
  std::function<Graph()> build;
};

const std::vector<Entry>& gallery() {
  static const std::vector<Entry> g{
      {"01-mlp", "MLP 784-256-10, batch 32, relu, softmax", mlp},
      {"02-convnet", "small conv net: 2x (conv3x3 + relu + maxpool2), linear, on 8x1x28x28", convnet},
      {"03-softmax", "softmax over the last dim of 64x1000", softmax_sample},
      {"04-layernorm", "layer norm over 768 features of 32x128x768", layernorm_sample},
      {"05-attention", "causal scaled dot-product attention, 2x12 heads, T=128, d=64", attention_sample},
      {"06-gpt2-block", "one GPT-2 small block (pre-LN, 12 heads, d=768, T=128, causal, GELU tanh)", gpt2_block_sample},
      {"07-mlp-train-step", "MLP forward, cross-entropy, backward and SGD update through Assign", mlp_train_step},
  };
  return g;
}

const std::vector<Entry>& bench() {
  static const std::vector<Entry> b{
      {"eltwise", "y = exp(relu(a*b + c) * 0.5), 16M f32", bench_eltwise},
      {"softmax", "softmax over the last dim of 4096x4096 f32", bench_softmax},
      {"layernorm", "layernorm over the last dim of 4096x4096 f32", bench_layernorm},
      {"matmul", "1024x1024x1024 f32 matmul", bench_matmul},
      {"matmul-int8", "1024x1024x1024 u8 x s8 -> s32 matmul", bench_matmul_int8},
      {"conv2d", "conv2d N8 C64 56x56, K64 3x3, pad 1, f32", bench_conv2d},
      {"dwconv", "depthwise conv2d N8 C144 56x56 3x3, pad 1, BatchNorm + ReLU6, f32", bench_dwconv},
      {"mlp", "MLP batch 256, 1024-4096-1024 with GELU", bench_mlp},
      {"gpt2-block", "one GPT-2-small block forward, T=128, d=768, 12 heads", gpt2_block_sample},
      {"attention-long", "causal attention, 12 heads, T=4096, d=64, f32 (flash-attention rules)", bench_attention_long},
  };
  return b;
}

const Entry* find(const std::string& name) {
  for (auto* list : {&gallery(), &bench()})
    for (auto& e : *list)
      if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

std::vector<std::string> sample_names() {
  std::vector<std::string> r;
  for (auto& e : gallery()) r.push_back(e.name);
  return r;
}

std::vector<std::string> bench_workload_names() {
  std::vector<std::string> r;
  for (auto& e : bench()) r.push_back(e.name);
  return r;
}

Graph build_sample(const std::string& name) {
  const Entry* e = find(name);
  if (!e) {
    std::string known;
    for (auto& n : sample_names()) known += " " + n;
    for (auto& n : bench_workload_names()) known += " " + n;
    throw UserError("unknown sample '" + name + "'; known:" + known);
  }
  return e->build();
}

std::string sample_description(const std::string& name) {
  const Entry* e = find(name);
  return e ? e->description : "";
}

}  // namespace lathe
