// unbind and split: a tensor cut into views along an axis (the data family's, as compositions of
// slice). Their gradients cost the size of the tensor, not that times the number of pieces:
// each slice adds its part in place into one gradient buffer (OpDef::accumulate).
#include "ops/defs/common.h"

namespace encore {
namespace {

Outputs pieces(std::vector<Tensor> v) { return Outputs(std::move(v)); }

OpDef& unbind_op = define_op({
    .name = "unbind",
    .kind = OpKind::Composite,
    .signature = "unbind(x: Tensor, axis: int = 0) -> tuple[Tensor, ...]",
    .invoke = [](const CallArgs& a) { return pieces(unbind(a.tensor(0), a.integer(1))); },
    .method = true,
    .doc = "The entries along `axis` as views without that axis",
    .examples = {{.inputs = {{{3, 4, 2}}}, .args = "axis=1"}},
});
OpDef& split_op = define_op({
    .name = "split",
    .kind = OpKind::Composite,
    .signature = "split(x: Tensor, sections: int, axis: int = 0) -> tuple[Tensor, ...]",
    .invoke =
        [](const CallArgs& a) { return pieces(split(a.tensor(0), a.integer(1), a.integer(2))); },
    .method = true,
    .doc = "`sections` equal views along `axis` (which it must divide), as numpy.split",
    .examples = {{.inputs = {{{3, 6}}}, .args = "sections=3, axis=1"}},
});

}  // namespace

std::vector<Tensor> unbind(const Tensor& x, int64_t axis) {
  const int ax = normalize_axis(axis, x.dim(), "unbind");
  std::vector<Tensor> out;
  out.reserve(x.shape()[ax]);
  for (int64_t i = 0; i < x.shape()[ax]; ++i) out.push_back(x.slice(ax, i, i + 1).squeeze(ax));
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t sections, int64_t axis) {
  const int ax = normalize_axis(axis, x.dim(), "split");
  const int64_t n = x.shape()[ax];
  ENCORE_CHECK(sections >= 1 && n % sections == 0, ValueError, "[split] ", sections,
               " sections do not divide axis ", ax, " of ", describe(x), " equally");
  const int64_t len = n / sections;
  std::vector<Tensor> out;
  out.reserve(sections);
  for (int64_t i = 0; i < sections; ++i) out.push_back(x.slice(ax, i * len, (i + 1) * len));
  return out;
}

}  // namespace encore
