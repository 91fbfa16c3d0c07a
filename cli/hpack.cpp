// SPDX-License-Identifier: Apache-2.0
#include "hpack.h"

#include <array>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

namespace cohort::cli::hpack {
namespace {

// RFC 7541 Appendix B: the length in bits of each symbol's code, octets 0 to
// 255 and then the end-of-string symbol. The code is canonical (codes of one
// length are consecutive, in symbol order, after those of shorter lengths),
// so the lengths are the whole table.
constexpr int kSymbols = 257;
constexpr int kEndOfString = 256;
constexpr int kLongestCode = 30;
constexpr std::array<std::uint8_t, kSymbols> kCodeLength = {
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,  //   0-15
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,  //  16-31
    6,  10, 10, 12, 13, 6,  8,  11, 10, 10, 8,  11, 8,  6,  6,  6,   //  ' '-'/'
    5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  7,  8,  15, 6,  12, 10,  //  '0'-'?'
    13, 6,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,   //  '@'-'O'
    7,  7,  7,  7,  7,  7,  7,  7,  8,  7,  8,  13, 19, 13, 14, 6,   //  'P'-'_'
    15, 5,  6,  5,  6,  5,  6,  6,  6,  5,  7,  7,  6,  6,  6,  5,   //  '`'-'o'
    6,  7,  6,  5,  5,  6,  7,  7,  7,  7,  7,  15, 11, 14, 13, 28,  //  'p'-127
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,  // 128-143
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,  // 144-159
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,  // 160-175
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,  // 176-191
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,  // 192-207
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,  // 208-223
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,  // 224-239
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,  // 240-255
    30,                                                              // end of string
};

// The canonical code, laid out for decoding bit by bit: the codes of length
// L are first[L] .. first[L] + count[L] - 1, for the symbols
// by_length[start[L]] onwards.
struct HuffmanTable {
  std::array<std::uint32_t, kLongestCode + 1> first{};
  std::array<std::uint32_t, kLongestCode + 1> count{};
  std::array<std::uint16_t, kLongestCode + 1> start{};
  std::array<std::uint16_t, kSymbols> by_length{};
  std::array<std::uint32_t, kSymbols> code{};  // each symbol's code, for the checks below
};

constexpr HuffmanTable MakeHuffmanTable() {
  HuffmanTable table;
  for (const std::uint8_t length : kCodeLength) ++table.count[length];
  std::uint32_t next = 0;
  std::uint16_t position = 0;
  for (int length = 1; length <= kLongestCode; ++length) {
    next = (next + table.count[length - 1]) << 1;
    table.first[length] = next;
    table.start[length] = position;
    for (int symbol = 0; symbol < kSymbols; ++symbol) {
      if (kCodeLength[symbol] != length) continue;
      table.code[symbol] = table.first[length] + (position - table.start[length]);
      table.by_length[position++] = static_cast<std::uint16_t>(symbol);
    }
  }
  return table;
}
constexpr HuffmanTable kHuffman = MakeHuffmanTable();
// Codes printed in RFC 7541 Appendix B, across the table: a wrong length
// above moves every code after it.
static_assert(kHuffman.code[0] == 0x1ff8);
static_assert(kHuffman.code['0'] == 0x0 && kHuffman.code['a'] == 0x3 && kHuffman.code['t'] == 0x9);
static_assert(kHuffman.code[' '] == 0x14 && kHuffman.code['z'] == 0x7b);
static_assert(kHuffman.code['&'] == 0xf8 && kHuffman.code['~'] == 0x1ffd);
static_assert(kHuffman.code['\\'] == 0x7fff0 && kHuffman.code[127] == 0xffffffc);
static_assert(kHuffman.code[128] == 0xfffe6 && kHuffman.code[200] == 0x3ffffe2);
static_assert(kHuffman.code[255] == 0x3ffffee && kHuffman.code[254] == 0x7fffff0);
static_assert(kHuffman.code[kEndOfString] == 0x3fffffff);

// RFC 7541 Appendix A.
constexpr std::array<std::pair<std::string_view, std::string_view>, 61> kStaticTable = {{
    {":authority", ""},
    {":method", "GET"},
    {":method", "POST"},
    {":path", "/"},
    {":path", "/index.html"},
    {":scheme", "http"},
    {":scheme", "https"},
    {":status", "200"},
    {":status", "204"},
    {":status", "206"},
    {":status", "304"},
    {":status", "400"},
    {":status", "404"},
    {":status", "500"},
    {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"},
    {"accept-language", ""},
    {"accept-ranges", ""},
    {"accept", ""},
    {"access-control-allow-origin", ""},
    {"age", ""},
    {"allow", ""},
    {"authorization", ""},
    {"cache-control", ""},
    {"content-disposition", ""},
    {"content-encoding", ""},
    {"content-language", ""},
    {"content-length", ""},
    {"content-location", ""},
    {"content-range", ""},
    {"content-type", ""},
    {"cookie", ""},
    {"date", ""},
    {"etag", ""},
    {"expect", ""},
    {"expires", ""},
    {"from", ""},
    {"host", ""},
    {"if-match", ""},
    {"if-modified-since", ""},
    {"if-none-match", ""},
    {"if-range", ""},
    {"if-unmodified-since", ""},
    {"last-modified", ""},
    {"link", ""},
    {"location", ""},
    {"max-forwards", ""},
    {"proxy-authenticate", ""},
    {"proxy-authorization", ""},
    {"range", ""},
    {"referer", ""},
    {"refresh", ""},
    {"retry-after", ""},
    {"server", ""},
    {"set-cookie", ""},
    {"strict-transport-security", ""},
    {"transfer-encoding", ""},
    {"user-agent", ""},
    {"vary", ""},
    {"via", ""},
    {"www-authenticate", ""},
}};

// RFC 7541 §4.1: an entry's size is its name and value plus 32.
constexpr std::size_t kEntryOverhead = 32;
std::size_t EntrySize(const Field& field) {
  return field.name.size() + field.value.size() + kEntryOverhead;
}

// RFC 7541 §5.1: an integer in the low `prefix_bits` of the first octet,
// continued in 7-bit groups when those bits are all set.
void AppendInteger(std::string& out, std::uint8_t first_bits, int prefix_bits, std::size_t value) {
  const std::size_t limit = (std::size_t{1} << prefix_bits) - 1;
  if (value < limit) {
    out.push_back(static_cast<char>(first_bits | value));
    return;
  }
  out.push_back(static_cast<char>(first_bits | limit));
  value -= limit;
  while (value >= 0x80) {
    out.push_back(static_cast<char>(0x80 | (value & 0x7f)));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void AppendString(std::string& out, std::string_view text) {
  AppendInteger(out, 0x00, 7, text.size());  // H = 0: not Huffman-coded
  out.append(text);
}

// Reads a block front to back.
class Reader {
 public:
  explicit Reader(std::string_view block) : rest_(block) {}

  [[nodiscard]] bool Done() const { return rest_.empty(); }
  [[nodiscard]] std::uint8_t Peek() const { return static_cast<std::uint8_t>(rest_.front()); }

  absl::StatusOr<std::size_t> Integer(int prefix_bits) {
    if (rest_.empty()) return Truncated("an integer");
    const std::size_t limit = (std::size_t{1} << prefix_bits) - 1;
    std::size_t value = Next() & limit;
    if (value < limit) return value;
    for (int shift = 0;; shift += 7) {
      // 2^28 and more is no length or index a header block can hold.
      if (shift > 21) return absl::InvalidArgumentError("header block: an integer is too large");
      if (rest_.empty()) return Truncated("an integer");
      const std::uint8_t octet = Next();
      value += static_cast<std::size_t>(octet & 0x7f) << shift;
      if ((octet & 0x80) == 0) return value;
    }
  }

  absl::StatusOr<std::string> String() {
    if (rest_.empty()) return Truncated("a string");
    const bool huffman = (Peek() & 0x80) != 0;
    absl::StatusOr<std::size_t> length = Integer(7);
    if (!length.ok()) return length.status();
    if (*length > rest_.size()) return Truncated("a string");
    const std::string_view text = rest_.substr(0, *length);
    rest_.remove_prefix(*length);
    if (!huffman) return std::string(text);
    return DecodeHuffman(text);
  }

 private:
  std::uint8_t Next() {
    const auto octet = static_cast<std::uint8_t>(rest_.front());
    rest_.remove_prefix(1);
    return octet;
  }
  static absl::Status Truncated(std::string_view what) {
    return absl::InvalidArgumentError(fmt::format("header block: it ends inside {}", what));
  }

  std::string_view rest_;
};

}  // namespace

void AppendLiteral(std::string& block, std::string_view name, std::string_view value) {
  AppendInteger(block, 0x00, 4, 0);  // 0000 + index 0: a literal name follows
  AppendString(block, name);
  AppendString(block, value);
}

absl::StatusOr<std::string> DecodeHuffman(std::string_view coded) {
  std::string out;
  out.reserve(coded.size() * 8 / 5);  // no code is shorter than five bits
  std::uint32_t code = 0;
  int length = 0;
  for (const char c : coded) {
    const auto octet = static_cast<std::uint8_t>(c);
    for (int bit = 7; bit >= 0; --bit) {
      code = (code << 1) | ((octet >> bit) & 1U);
      ++length;
      // In a canonical code a prefix that matched no shorter code is at
      // least first[length], so one comparison tells whether it is a code.
      const std::uint32_t offset = code - kHuffman.first[length];
      if (offset < kHuffman.count[length]) {
        const std::uint16_t symbol = kHuffman.by_length[kHuffman.start[length] + offset];
        if (symbol == kEndOfString) {
          return absl::InvalidArgumentError("Huffman string: it holds the end-of-string code");
        }
        out.push_back(static_cast<char>(symbol));
        code = 0;
        length = 0;
      } else if (length == kLongestCode) {
        return absl::InvalidArgumentError("Huffman string: a code that is not in the table");
      }
    }
  }
  // RFC 7541 §5.2: the last octet is padded with the end-of-string code's
  // leading (1) bits, fewer than eight.
  if (length > 7 || code != (1U << length) - 1) {
    return absl::InvalidArgumentError(
        "Huffman string: the padding is not the end-of-string code's first bits");
  }
  return out;
}

Decoder::Decoder(std::size_t max_table_size)
    : max_table_size_(max_table_size), capacity_(max_table_size) {}

absl::StatusOr<Field> Decoder::Lookup(std::size_t index) const {
  if (index >= 1 && index <= kStaticTable.size()) {
    const auto& [name, value] = kStaticTable[index - 1];
    return Field{std::string(name), std::string(value)};
  }
  const std::size_t dynamic = index - kStaticTable.size() - 1;
  if (index == 0 || dynamic >= table_.size()) {
    return absl::InvalidArgumentError(
        fmt::format("header block: index {} is in neither table (the dynamic one holds {} entries)",
                    index, table_.size()));
  }
  return table_[dynamic];
}

void Decoder::EvictTo(std::size_t limit) {
  while (size_ > limit) {
    size_ -= EntrySize(table_.back());
    table_.pop_back();
  }
}

void Decoder::Insert(Field field) {
  const std::size_t size = EntrySize(field);
  // An entry larger than the table empties it and is not kept (§4.4).
  EvictTo(size > capacity_ ? 0 : capacity_ - size);
  if (size > capacity_) return;
  size_ += size;
  table_.push_front(std::move(field));
}

absl::Status Decoder::Decode(std::string_view block, std::vector<Field>& fields) {
  Reader reader(block);
  bool field_seen = false;
  while (!reader.Done()) {
    const std::uint8_t first = reader.Peek();
    if ((first & 0x80) != 0) {  // 1xxxxxxx: indexed field (§6.1)
      absl::StatusOr<std::size_t> index = reader.Integer(7);
      if (!index.ok()) return index.status();
      absl::StatusOr<Field> field = Lookup(*index);
      if (!field.ok()) return field.status();
      fields.push_back(*std::move(field));
      field_seen = true;
      continue;
    }
    if ((first & 0xe0) == 0x20) {  // 001xxxxx: dynamic table size update (§6.3)
      absl::StatusOr<std::size_t> size = reader.Integer(5);
      if (!size.ok()) return size.status();
      if (field_seen) {
        return absl::InvalidArgumentError(
            "header block: a table size update after a field (it must come first)");
      }
      if (*size > max_table_size_) {
        return absl::InvalidArgumentError(
            fmt::format("header block: a table size update to {} octets, over the {} allowed",
                        *size, max_table_size_));
      }
      capacity_ = *size;
      EvictTo(capacity_);
      continue;
    }
    // Literal fields: 01xxxxxx is added to the table (§6.2.1), 0000xxxx and
    // 0001xxxx are not (§6.2.2, §6.2.3).
    const bool indexed = (first & 0xc0) == 0x40;
    absl::StatusOr<std::size_t> name_index = reader.Integer(indexed ? 6 : 4);
    if (!name_index.ok()) return name_index.status();
    Field field;
    if (*name_index == 0) {
      absl::StatusOr<std::string> name = reader.String();
      if (!name.ok()) return name.status();
      field.name = *std::move(name);
    } else {
      absl::StatusOr<Field> named = Lookup(*name_index);
      if (!named.ok()) return named.status();
      field.name = std::move(named->name);
    }
    absl::StatusOr<std::string> value = reader.String();
    if (!value.ok()) return value.status();
    field.value = *std::move(value);
    if (indexed) Insert(field);
    fields.push_back(std::move(field));
    field_seen = true;
  }
  return absl::OkStatus();
}

}  // namespace cohort::cli::hpack
