// Whether traced functions check that the ranks agree before a graph with collectives first
// replays (graph/agreement.cpp installs dist::check_agreement into the effects rule's hook).
#pragma once

namespace encore::graph {

bool agreement_check_installed();

}  // namespace encore::graph
