#include "app/analysis/text_table.h"

#include <algorithm>

namespace shardscope::analysis {

void print_text_table(const std::vector<std::vector<std::string>>& table, bool markdown,
                      std::ostream& out) {
  if (table.empty()) return;
  std::vector<size_t> width(table[0].size(), 0);
  for (const auto& line : table) {
    for (size_t i = 0; i < line.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], line[i].size());
    }
  }
  for (size_t k = 0; k < table.size(); ++k) {
    if (markdown) out << "| ";
    for (size_t i = 0; i < table[k].size() && i < width.size(); ++i) {
      out << table[k][i] << std::string(width[i] - table[k][i].size(), ' ')
          << (markdown ? " | " : "  ");
    }
    out << "\n";
    if (k == 0 && markdown) {
      out << "|";
      for (size_t w : width) out << std::string(w + 2, '-') << "|";
      out << "\n";
    }
  }
}

}  // namespace shardscope::analysis
