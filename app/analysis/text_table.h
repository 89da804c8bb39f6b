#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace shardscope::analysis {

// Rows of cells (the first row is the header) as aligned columns, or as a Markdown table.
void print_text_table(const std::vector<std::vector<std::string>>& table, bool markdown,
                      std::ostream& out);

}  // namespace shardscope::analysis
