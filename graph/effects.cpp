#include "graph/effects.h"

#include <algorithm>
#include <atomic>

#include "core/dist.h"

namespace encore::graph {

namespace {

// The world's check (core/dist.h): a group of one agrees with itself without communicating.
std::atomic<AgreementCheck> g_check{&dist::check_agreement};

std::string values_text(const std::vector<Value>& vs) {
  std::string s;
  for (size_t i = 0; i < vs.size(); ++i)
    s += detail::cat(i ? ", " : "", vs[i].shape.str(), " ", name(vs[i].dtype));
  return vs.size() == 1 ? s : "(" + s + ")";
}

}  // namespace

AgreementCheck set_agreement_check(AgreementCheck check) { return g_check.exchange(check); }
AgreementCheck agreement_check() { return g_check.load(); }

bool has_external_effects(const Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(),
                     [](const Node& n) { return n.op->external_effect; });
}

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

EffectsDigest effects_digest(const Graph& g, std::string_view function,
                             std::string_view signature) {
  std::string s =
      detail::cat("traced function '", function, "' ", signature, "; external effects:");
  int k = 0;
  for (const Node& n : g.nodes) {
    if (!n.op->external_effect) continue;
    const std::string attrs = n.attrs.str();
    s += detail::cat(k++ ? "; " : " ", n.op->name, "(", attrs, ") ", values_text(n.in), " -> ",
                     values_text(n.out));
  }
  return {fnv1a(s), s};
}

void use_stand_ins(Graph& g, std::string_view why) {
  for (Node& n : g.nodes) {
    if (!n.op->external_effect) continue;
    ENCORE_CHECK(n.op->stand_in, UnsupportedError, "[", n.op->name,
                 "] acts outside the process (an external effect) "
                 "and its row declares no stand-in, so ",
                 why,
                 " cannot run it: the effects rule lets only the "
                 "caller's own calls run such an op (docs/ARCHITECTURE.md, \"Effects\")");
    const OpDef& stand_in = n.op->stand_in();
    ENCORE_CHECK(!stand_in.external_effect, UnsupportedError, "[", n.op->name, "] declares ",
                 stand_in.name, " as its stand-in, which has an external effect itself");
    n.op = &stand_in;
  }
}

}  // namespace encore::graph
