#include "support/json_input.hpp"

#include <utility>
#include <vector>

namespace moejit {
namespace {

using json = nlohmann::json;

// The largest length <= `max` that does not split a UTF-8 sequence of `s`, so a shortened
// message stays valid UTF-8 (the CLI prints messages inside JSON).
std::size_t utf8_boundary(std::string_view s, std::size_t max) {
  while (max > 0 && max < s.size() && (static_cast<unsigned char>(s[max]) & 0xC0) == 0x80) --max;
  return max;
}

// Builds the value from nlohmann's SAX events with an explicit stack of open containers, so depth
// costs heap, not call frames, and is refused past the limit before anything is allocated for it.
class BoundedBuilder final : public nlohmann::json_sax<json> {
 public:
  BoundedBuilder(std::string_view source, std::size_t max_depth) : source_(source), max_depth_(max_depth) {}

  json& root() { return root_; }
  const Status& status() const { return status_; }

  bool null() override { return put(json(nullptr)) != nullptr; }
  bool boolean(bool v) override { return put(json(v)) != nullptr; }
  bool number_integer(number_integer_t v) override { return put(json(v)) != nullptr; }
  bool number_unsigned(number_unsigned_t v) override { return put(json(v)) != nullptr; }
  bool number_float(number_float_t v, const string_t&) override { return put(json(v)) != nullptr; }
  bool string(string_t& v) override { return put(json(std::move(v))) != nullptr; }
  bool binary(binary_t& v) override { return put(json::binary(std::move(v))) != nullptr; }

  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    json& object = *open_.back();
    if (object.contains(k)) {
      status_ = error(Code::invalid_argument, "{}: duplicate key '{}' in the object at {}: expected each key once",
                      source_, cut(k), pointer());
      return false;
    }
    key_ = std::move(k);
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) override {
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 5: ..."; the
    // bracketed id means nothing to a user, and the last token read may be the whole input.
    std::string_view what = e.what();
    if (auto end = what.find("] "); what.starts_with('[') && end != std::string_view::npos)
      what.remove_prefix(end + 2);
    status_ = error(Code::invalid_argument, "{}: not valid JSON: {}", source_, cut(what, 240));
    return false;
  }

 private:
  static std::string cut(std::string_view s, std::size_t max = 64) {
    return s.size() <= max ? std::string(s) : std::string(s.substr(0, utf8_boundary(s, max))) + "...";
  }

  // Where the innermost open container sits, as a JSON pointer ("/text_config"; "" is the root).
  std::string pointer() const {
    std::string p;
    for (std::size_t i = 1; i < path_.size(); ++i) {
      p += '/';
      p += cut(path_[i]);
    }
    return p.empty() ? std::string("the top level") : fmt::format("'{}'", p);
  }

  // Stores `v` where the parser is (root, next array element, or the pending key).
  json* put(json v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }

  bool open(json container) {
    if (open_.size() >= max_depth_) {
      status_ = error(Code::invalid_argument,
                      "{}: arrays and objects nested deeper than {} levels: expected at most {}", source_,
                      max_depth_, max_depth_);
      return false;
    }
    std::string segment;
    if (!open_.empty()) segment = open_.back()->is_array() ? std::to_string(open_.back()->size()) : key_;
    open_.push_back(put(std::move(container)));
    path_.push_back(std::move(segment));
    return true;
  }

  bool close() {
    open_.pop_back();
    path_.pop_back();
    return true;
  }

  std::string_view source_;
  std::size_t max_depth_;
  json root_;
  // The open containers, outermost first. A pointer stays valid while its container is open:
  // only the innermost one grows, and growing moves its elements, never itself.
  std::vector<json*> open_;
  std::vector<std::string> path_;  // the key or index of each open container in its parent
  string_t key_;
  Status status_;
};

}  // namespace

Result<json> parse_json_input(std::string_view text, std::string_view source, std::size_t max_depth) {
  BoundedBuilder builder(source, max_depth);
  const bool ok = json::sax_parse(text, &builder, json::input_format_t::json, /*strict=*/true);
  if (!ok) {
    if (!builder.status().ok()) return builder.status();
    return error(Code::invalid_argument, "{}: not valid JSON", source);
  }
  return std::move(builder.root());
}

std::string json_excerpt(const json& value, std::size_t max_chars) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > max_chars) {
    text.resize(utf8_boundary(text, max_chars));
    text += "...";
  }
  return text;
}

}  // namespace moejit
