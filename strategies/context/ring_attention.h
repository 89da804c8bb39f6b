#pragma once

#include <array>
#include <cstdint>

#include <torch/types.h>

namespace shardscope {

class Comm;

// Context parallelism's attention (ring attention): each of c ranks holds part of every sequence
// and no rank holds all its keys, so key/value blocks travel around the ring of ranks while each
// rank attends its queries to the block in hand. Used by the `cp` strategy.
namespace cp {

// Zig-zag causal load balancing: a sequence is cut into 2c equal chunks and ring rank i holds
// chunks i and 2c-1-i, an early chunk (few keys before it) and a late one (many), so every rank
// does the same attention work.
std::array<int, 2> zigzag_chunks(int rank, int ranks);
// The positions in the sequence of rank `rank`'s tokens, in the order it holds them ([2 s/2c]).
torch::Tensor zigzag_positions(int64_t seq, int rank, int ranks);

// Under causal attention, queries of chunk `query_chunk` attend keys of chunk `key_chunk` only
// if that chunk is not later (the same chunk: the causal diagonal). Pairs that are wholly masked
// are skipped, which is where an unbalanced split loses: its last rank computes the most pairs.
bool attends(int query_chunk, int key_chunk);
// Chunk pairs a rank holding `query_chunks` computes over a whole ring pass of `chunks` chunks.
int attended_pairs(const std::array<int, 2>& query_chunks, int chunks);

struct Ring {
  Comm* comm = nullptr;  // the ranks that split the sequence, in ring order
  int rank = 0;          // this rank's place in the ring
  int ranks = 1;
};

// Causal attention of this rank's queries to the whole sequence: q, k, v are [B, H, 2L, D] with
// the rank's two zig-zag chunks of L tokens each. Forward passes each (k, v) block to the next
// rank while it computes on the one in hand; backward sends the blocks around again with their
// gradients accumulating as they go, so a rank keeps only its own q, k, v, output and row
// log-sum-exp between forward and backward (activation memory 1/c of one device's). The maths is
// in fp32 whatever the inputs' dtype; the result has q's dtype, laid out as the attention
// projection reads it ([B, 2L, H, D] memory, returned as its [B, H, 2L, D] view).
torch::Tensor ring_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const Ring& ring);

}  // namespace cp
}  // namespace shardscope
