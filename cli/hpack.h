// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

/// HPACK (RFC 7541), the header compression of HTTP/2, as far as a gRPC
/// client needs it: it writes literal fields and reads everything a server
/// may send (indexed fields, the dynamic table, Huffman-coded strings).
namespace cohort::cli::hpack {

struct Field {
  std::string name;
  std::string value;
  friend bool operator==(const Field&, const Field&) = default;
};

/// Appends `name: value` to a header block as a literal field without
/// indexing, its strings not Huffman-coded (RFC 7541 §6.2.2): every decoder
/// reads it and it leaves the peer's dynamic table as it was.
void AppendLiteral(std::string& block, std::string_view name, std::string_view value);

/// Decodes a Huffman-coded string (RFC 7541 §5.2 and Appendix B).
/// InvalidArgument for a code that is not in the table, the end-of-string
/// symbol inside the string, or padding that is not 1 bits or longer than
/// seven bits.
[[nodiscard]] absl::StatusOr<std::string> DecodeHuffman(std::string_view coded);

/// Decodes the header blocks of one connection, in the order they arrive:
/// the dynamic table carries over from one block to the next.
class Decoder {
 public:
  /// `max_table_size` is the SETTINGS_HEADER_TABLE_SIZE this side announced
  /// (4096 unless it said otherwise): the most a size update may ask for.
  explicit Decoder(std::size_t max_table_size = 4096);

  /// Appends the fields of one whole header block (a HEADERS frame and its
  /// CONTINUATIONs, padding removed) to `fields`. InvalidArgument for a
  /// malformed block, naming what was wrong: after that the connection's
  /// table is undefined and the connection must be closed (RFC 7541 §2.3.3).
  [[nodiscard]] absl::Status Decode(std::string_view block, std::vector<Field>& fields);

  /// The dynamic table's size as RFC 7541 §4.1 counts it.
  [[nodiscard]] std::size_t TableSize() const { return size_; }

 private:
  [[nodiscard]] absl::StatusOr<Field> Lookup(std::size_t index) const;
  void Insert(Field field);
  void EvictTo(std::size_t limit);

  std::size_t max_table_size_;
  std::size_t capacity_;
  std::size_t size_ = 0;
  std::deque<Field> table_;  ///< newest first: dynamic index 62 is front()
};

}  // namespace cohort::cli::hpack
