// The rank-agreement check of traced steps with collectives: before a graph that contains ops
// with an external effect first replays, the trace driver hands a hash of its signature and of
// its sequence of such ops to the hook of graph/effects.h, and dist::check_agreement compares
// it across the ranks (an error naming every rank's graph instead of a deadlock).
//
// graph/effects.h (the effects rule) comes with the trace driver's side of the rule; until that
// header exists in the tree this file installs nothing, and the tests that need the hook skip
// (graph::agreement_check_installed()).
#include "graph/agreement.h"

#include "core/dist.h"

#if __has_include("graph/effects.h")
#include "graph/effects.h"

namespace encore::graph {
namespace {
const bool kInstalled = (set_agreement_check(&dist::check_agreement), true);
}  // namespace
bool agreement_check_installed() { return true; }
}  // namespace encore::graph

#else

namespace encore::graph {
bool agreement_check_installed() { return false; }
}  // namespace encore::graph

#endif
