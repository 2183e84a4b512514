#include "graph/graph.h"

#include <sstream>

namespace encore::graph {

namespace {

std::string value_name(const Graph& g, const Value& v) {
  const Buffer& b = g.buffers[v.buffer];
  const bool whole = v.offset == 0 && v.shape.numel() * itemsize(v.dtype) == b.nbytes &&
                     v.strides == contiguous_strides(v.shape);
  if (whole) return b.label;
  return b.label + "[view " + v.shape.str() + " strides " + v.strides.str() + " +" +
         std::to_string(v.offset) + "]";
}

}  // namespace

std::string Graph::str(const std::function<std::string(size_t)>& note) const {
  std::ostringstream s;
  s << "graph(";
  for (size_t i = 0; i < inputs.size(); ++i)
    s << (i ? ", " : "") << buffers[inputs[i].buffer].label << ": " << inputs[i].shape.str() << " "
      << name(inputs[i].dtype);
  s << ") {\n";
  for (const Node& n : nodes) {
    s << "  ";
    for (size_t i = 0; i < n.out.size(); ++i) s << (i ? ", " : "") << value_name(*this, n.out[i]);
    if (!n.out.empty()) s << " = ";
    s << n.op->name << "(";
    for (size_t i = 0; i < n.in.size(); ++i) s << (i ? ", " : "") << value_name(*this, n.in[i]);
    const std::string a = n.attrs.str();
    if (!a.empty()) s << (n.in.empty() ? "" : "; ") << a;
    s << ")";
    if (!n.out.empty()) s << "  " << n.out[0].shape.str() << " " << name(n.out[0].dtype);
    if (note)
      if (const std::string text = note(static_cast<size_t>(&n - nodes.data())); !text.empty())
        s << "  # " << text;
    s << "\n";
  }
  s << "  return ";
  for (size_t i = 0; i < outputs.size(); ++i) s << (i ? ", " : "") << value_name(*this, outputs[i]);
  s << "\n}\n";
  return s.str();
}

std::string Graph::dot() const {
  std::ostringstream s;
  s << "digraph encore {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n";
  for (size_t b = 0; b < buffers.size(); ++b) {
    const Buffer& buf = buffers[b];
    const char* style = buf.kind == BufferKind::External ? ", style=filled, fillcolor=\"#dde7f7\""
                        : buf.kind == BufferKind::Input  ? ", style=filled, fillcolor=\"#e4f2dc\""
                                                         : "";
    s << "  b" << b << " [shape=ellipse, label=\"" << buf.label << "\\n"
      << buf.nbytes << " B\"" << style << "];\n";
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    s << "  n" << i << " [shape=box, label=\"" << n.op->name;
    if (!n.out.empty()) s << "\\n" << n.out[0].shape.str();
    s << "\"];\n";
    for (const Value& v : n.in) s << "  b" << v.buffer << " -> n" << i << ";\n";
    for (const Value& v : n.out) s << "  n" << i << " -> b" << v.buffer << ";\n";
    const OpDef& def = *n.op;
    for (size_t k = 0; k < n.in.size(); ++k)
      if (def.writes(static_cast<int>(k), static_cast<int>(n.in.size()), n.attrs))
        s << "  n" << i << " -> b" << n.in[k].buffer << " [style=dashed, label=\"writes\"];\n";
  }
  s << "}\n";
  return s.str();
}

int Graph::count(std::string_view op) const {
  int c = 0;
  for (const Node& n : nodes) c += n.op->name == op;
  return c;
}

}  // namespace encore::graph
