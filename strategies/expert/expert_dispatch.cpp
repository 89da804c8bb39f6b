#include "strategies/expert/expert_dispatch.h"

#include <numeric>

#include <ATen/autocast_mode.h>
#include <torch/autograd.h>
#include <torch/torch.h>

#include "engine/comm/comm.h"

namespace shardscope::ep {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::Tensor exchange(const torch::Tensor& x, Comm* comm, const std::vector<int64_t>& output_rows,
                       const std::vector<int64_t>& input_rows) {
  if (comm == nullptr) return x.clone();  // a group of one keeps its rows
  auto sizes = x.sizes().vec();
  sizes[0] = std::accumulate(output_rows.begin(), output_rows.end(), int64_t{0});
  auto out = torch::empty(sizes, x.options());
  comm->all_to_all(out, x.contiguous(), output_rows, input_rows);
  return out;
}

struct AllToAllRows : torch::autograd::Function<AllToAllRows> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, Comm* comm,
                               const std::vector<int64_t>& output_rows,
                               const std::vector<int64_t>& input_rows) {
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(comm);
    ctx->saved_data["output_rows"] = output_rows;
    ctx->saved_data["input_rows"] = input_rows;
    return exchange(x, comm, output_rows, input_rows);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* comm = reinterpret_cast<Comm*>(ctx->saved_data["comm"].toInt());
    const auto output_rows = ctx->saved_data["output_rows"].toIntVector();
    const auto input_rows = ctx->saved_data["input_rows"].toIntVector();
    // Each gradient row returns to the rank its row came from: the splits swap.
    return {exchange(grads[0], comm, input_rows, output_rows), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

// Rows per destination: the counts of consecutive groups of `per_rank` experts.
std::vector<int64_t> rows_per_rank(const int64_t* per_expert, int ranks, int per_rank) {
  std::vector<int64_t> rows(ranks, 0);
  for (int j = 0; j < ranks; ++j)
    for (int l = 0; l < per_rank; ++l) rows[j] += per_expert[j * per_rank + l];
  return rows;
}

}  // namespace

torch::Tensor all_to_all_rows(const torch::Tensor& x, Comm* comm,
                              const std::vector<int64_t>& output_rows,
                              const std::vector<int64_t>& input_rows) {
  return AllToAllRows::apply(x, comm, output_rows, input_rows);
}

torch::Tensor dispatch_to_experts(const torch::Tensor& tokens, const torch::Tensor& chosen,
                                  const torch::Tensor& weights, const std::vector<Mlp>& local,
                                  const Placement& placement) {
  const int ranks = placement.ranks, per_rank = placement.per_rank();
  TORCH_CHECK(static_cast<int>(local.size()) == per_rank, "ep: ", local.size(),
              " local experts, expected ", per_rank);
  const int64_t k = chosen.size(1);
  // The flat choices sorted by expert, hence by destination rank (experts are held in order);
  // stable, so each expert sees its tokens in token order.
  const auto flat = chosen.reshape({-1});
  const auto order = std::get<1>(flat.sort(/*stable=*/true, 0, false));
  const auto token_of_pick = torch::div(order, k, "floor");

  // How many tokens each rank sends each expert: every rank learns what it will receive.
  auto sent_counts = torch::bincount(flat, {}, placement.experts);
  auto received_counts = sent_counts;
  if (placement.comm != nullptr) {
    received_counts = torch::empty_like(sent_counts);
    placement.comm->all_to_all(received_counts, sent_counts);
  }
  sent_counts = sent_counts.to(torch::kCPU);
  received_counts = received_counts.to(torch::kCPU);  // [source rank][local expert]
  const auto* sent = sent_counts.data_ptr<int64_t>();
  const auto* received = received_counts.data_ptr<int64_t>();
  const auto input_rows = rows_per_rank(sent, ranks, per_rank);
  const auto output_rows = rows_per_rank(received, ranks, per_rank);

  auto outgoing = tokens.index_select(0, token_of_pick);
  const auto device_type = tokens.device().type();
  if (at::autocast::is_autocast_enabled(device_type))
    outgoing = outgoing.to(at::autocast::get_autocast_dtype(device_type));
  const auto incoming = all_to_all_rows(outgoing, placement.comm, output_rows, input_rows);

  // The rows arrive by source rank, each source's sorted by expert: regroup them by local expert
  // so each expert runs once on all its rows, then put the outputs back in arrival order.
  std::vector<int64_t> grouped_rows;
  grouped_rows.reserve(incoming.size(0));
  std::vector<int64_t> source_begin(ranks, 0);
  for (int i = 1; i < ranks; ++i) source_begin[i] = source_begin[i - 1] + output_rows[i - 1];
  std::vector<int64_t> expert_rows(per_rank, 0);
  for (int l = 0; l < per_rank; ++l) {
    for (int i = 0; i < ranks; ++i) {
      int64_t begin = source_begin[i];
      for (int before = 0; before < l; ++before) begin += received[i * per_rank + before];
      for (int64_t r = 0; r < received[i * per_rank + l]; ++r) grouped_rows.push_back(begin + r);
      expert_rows[l] += received[i * per_rank + l];
    }
  }
  std::vector<int64_t> arrival(grouped_rows.size());
  for (size_t p = 0; p < grouped_rows.size(); ++p)
    arrival[grouped_rows[p]] = static_cast<int64_t>(p);
  const auto index_options = torch::TensorOptions().dtype(torch::kLong);
  const auto to_grouped = torch::tensor(grouped_rows, index_options).to(tokens.device());
  const auto to_arrival = torch::tensor(arrival, index_options).to(tokens.device());

  const auto grouped = incoming.index_select(0, to_grouped);
  std::vector<torch::Tensor> outputs;
  int64_t begin = 0;
  for (int l = 0; l < per_rank; ++l) {
    // Every expert runs, on no rows if none came: each always has a gradient.
    Mlp expert = local[l];
    outputs.push_back(expert->forward(grouped.narrow(0, begin, expert_rows[l])));
    begin += expert_rows[l];
  }
  const auto computed = torch::cat(outputs).index_select(0, to_arrival);

  const auto returned = all_to_all_rows(computed, placement.comm, input_rows, output_rows);
  const auto weight =
      weights.reshape({-1}).index_select(0, order).unsqueeze(1).to(returned.scalar_type());
  auto out = torch::zeros_like(tokens);
  out.index_add_(0, token_of_pick, (returned * weight).to(out.scalar_type()));
  return out;
}

}  // namespace shardscope::ep
