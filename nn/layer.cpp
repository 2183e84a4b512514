#include "nn/layer.h"

#include <cctype>
#include <deque>
#include <map>
#include <mutex>

#include "ops/examples.h"

namespace encore::nn {

namespace {

struct Entry {
  LayerDef def;
  Signature signature;
};

struct Registry {
  std::mutex mutex;
  std::deque<Entry> entries;  // stable addresses
  std::vector<const LayerDef*> order;
  std::map<std::string, Entry*, std::less<>> by_name;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed, as the op registry
  return *r;
}

// The class names a layer's required argument may have.
constexpr std::string_view kLayerTypes[] = {"Module", "Recurrent"};

Signature full_signature(const LayerDef& def) {
  Signature s = Signature::parse(def.signature, kLayerTypes);
  ENCORE_CHECK(s.name == def.name, ValueError, "[layers] layer '", def.name,
               "' has the signature of '", s.name, "'");
  ENCORE_CHECK(std::none_of(s.params.begin(), s.params.end(),
                            [](const Param& p) { return p.default_value.has_value(); }),
               ValueError, "[layers] ", def.name,
               ": an argument with a default is an option (its options list)");
  if (def.options)
    for (const OptionField& f : def.options()) s.params.push_back(f.param);
  return s;
}

Entry& entry_of(const LayerDef& def) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto it = r.by_name.find(def.name);
  ENCORE_CHECK(it != r.by_name.end() && &it->second->def == &def, ValueError, "[layers] '",
               def.name, "' is not a registered layer row");
  return *it->second;
}

}  // namespace

std::string snake_case(std::string_view name) {
  std::string out;
  const auto upper = [](char c) { return std::isupper(static_cast<unsigned char>(c)) != 0; };
  const auto lower = [](char c) { return std::islower(static_cast<unsigned char>(c)) != 0; };
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (upper(c)) {
      const bool after_lower = i > 0 && lower(name[i - 1]);
      const bool before_lower = i + 1 < name.size() && lower(name[i + 1]);
      if (i > 0 && (after_lower || (before_lower && upper(name[i - 1])))) out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

const LayerDef& define_layer(LayerDef&& def) {
  Registry& r = registry();
  Signature signature = full_signature(def);
  std::lock_guard lock(r.mutex);
  ENCORE_CHECK(def.name && !r.by_name.count(def.name), ValueError, "[layers] layer '",
               def.name ? def.name : "(null)", "' is defined twice");
  Entry& e = r.entries.emplace_back(Entry{std::move(def), std::move(signature)});
  r.order.push_back(&e.def);
  r.by_name.emplace(e.def.name, &e);
  return e.def;
}

std::span<const LayerDef* const> all_layers() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.order;
}

const LayerDef& layer_def(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto it = r.by_name.find(name);
  ENCORE_CHECK(it != r.by_name.end(), ValueError, "[layers] no layer named '", name, "'");
  return it->second->def;
}

const Signature& layer_signature(const LayerDef& def) { return entry_of(def).signature; }

std::span<const OptionField> layer_options(const LayerDef& def) {
  if (!def.options) return {};
  return def.options();
}

Tensor layer_example_input(const LayerDef& def, DType float_dtype, Device device) {
  return example_input(def.example.input, float_dtype, device);
}

LayerPtr make_example_layer(const LayerDef& def) {
  if (def.example.make) return def.example.make();
  return def.make(
      CallArgs::bind(layer_signature(def), {}, parse_keyword_literals(def.example.args)));
}

}  // namespace encore::nn
