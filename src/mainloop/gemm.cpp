// coda::gemm, PreparedGemm and the queries: validate, plan (planner.hpp), launch the store kernel.
#include "coda/gemm.hpp"

#include <cstdint>

#include "coda/core/device.hpp"
#include "coda/core/validate.hpp"
#include "coda/mainloop/tiles.hpp"
#include "coda/prepared_gemm.hpp"
#include "coda/sm90/tensor_map.hpp"
#include "mainloop/launch.hpp"
#include "mainloop/planner.hpp"

namespace coda {
namespace {

constexpr const char* kGemm = "coda::gemm";
constexpr const char* kPrepare = "coda::PreparedGemm";

mainloop::Problem validated(const GemmOperand& a, const GemmOperand& b, const TensorView& c, const GemmOptions& options,
                            const char* function) {
  mainloop::Problem p = mainloop::validate_operands(a, b, options, function);
  mainloop::validate_output(c, p, function);
  require_hopper(function);
  return p;
}

mainloop::Launcher store_kernel(GemmTile tile, DType input, Major a, Major b) {
  return mainloop::with_tile(
      tile, [&]<class Tile>() { return mainloop::launcher_for<Tile>(input, a, b); },
      []() -> mainloop::Launcher { throw InternalError(kGemm, "no kernel for the automatic tile"); });
}

}  // namespace

GemmPlan plan_gemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c, const GemmOptions& options) {
  return reported_by("coda::plan_gemm", [&] {
    const mainloop::Problem p = validated(a, b, c, options, "coda::plan_gemm");
    return mainloop::make_plan(p, options, "coda::plan_gemm").public_plan;
  });
}

std::size_t gemm_workspace_bytes(const GemmOperand& a, const GemmOperand& b, const TensorView& c,
                                 const GemmOptions& options) {
  constexpr const char* kFunction = "coda::gemm_workspace_bytes";
  return reported_by(kFunction, [&] {
    const mainloop::Problem p = validated(a, b, c, options, kFunction);
    GemmOptions sizing = options;  // as if a workspace of any size were given
    sizing.workspace = reinterpret_cast<void*>(uintptr_t(256));
    sizing.workspace_bytes = SIZE_MAX;
    return mainloop::make_plan(p, sizing, kFunction).public_plan.workspace_bytes;
  });
}

namespace {

// The partials of a plan that splits K are laid out from this address when prepared, and moved to
// the run's workspace by the same offsets.
constexpr uintptr_t kPreparedWorkspace = 256;

// A validated, planned call (coda::gemm's whole work but the launch); PreparedGemm keeps one.
struct Prepared {
  mainloop::LaunchPlan launch;
  mainloop::StoreParams store{};
  mainloop::Launcher launcher = nullptr;
  int device = 0;

  Prepared(const GemmOperand& a, const GemmOperand& b, const TensorView& c, const GemmOptions& options,
           const char* function) {
    const mainloop::Problem p = validated(a, b, c, options, function);
    GemmOptions laid_out = options;
    if (options.workspace != nullptr) laid_out.workspace = reinterpret_cast<void*>(kPreparedWorkspace);
    const mainloop::Plan plan = mainloop::make_plan(p, laid_out, function);
    launch = mainloop::build_launch(a, b, p, plan, laid_out);
    store.output = sm90::make_tensor_map_3d(c.data, c.dtype, {c.cols(), c.rows(), c.batch()},
                                            {c.ld(), c.batch_stride()}, {uint32_t(128 / size_of(c.dtype)), 64}, "c");
    store.output_type = c.dtype;
    launcher = store_kernel(plan.public_plan.tile, p.input, a.major, b.major);
    device = current_device_index();
  }

  void run(const void* a, const void* b, void* c, cudaStream_t stream, void* workspace, const char* function) const {
    const bool needs_workspace = launch.summary.workspace_bytes > 0;
    ArgumentCheck check(function);
    check.not_null("a", a).not_null("b", b).not_null("c", c);
    for (auto [argument, address] : {std::pair{"a", a}, {"b", b}, {"c", static_cast<const void*>(c)}})
      check.require(reinterpret_cast<uintptr_t>(address) % 16 == 0, argument,
                    "base address must be 16-byte aligned for TMA");
    check.require(!needs_workspace || workspace != nullptr, "workspace", "is null but the plan splits K and needs ",
                  launch.summary.workspace_bytes, " bytes");
    check.throw_if_error();
    const int current = current_device_index();
    if (current != device)
      throw Unsupported(function, text("prepared on device ", device, " but device ", current, " is current"));
    mainloop::LaunchPlan moved = launch;
    mainloop::StoreParams moved_store = store;
    sm90::replace_tensor_map_address(moved.a, launch.swap_ab ? b : a, launch.swap_ab ? "b" : "a");  // C^T = B A^T
    sm90::replace_tensor_map_address(moved.b, launch.swap_ab ? a : b, launch.swap_ab ? "a" : "b");
    sm90::replace_tensor_map_address(moved_store.output, c, "c");
    if (needs_workspace) {
      auto* base = static_cast<uint8_t*>(workspace);
      const auto offset = [&](const void* laid_out) {
        return reinterpret_cast<uintptr_t>(laid_out) - kPreparedWorkspace;
      };
      moved.partials.arrivals = reinterpret_cast<int32_t*>(base + offset(launch.partials.arrivals));
      moved.partials.partials = reinterpret_cast<float*>(base + offset(launch.partials.partials));
    }
    launcher(moved, moved.kernel_params(moved_store), stream);
  }
};

}  // namespace

struct PreparedGemm::State : Prepared {
  using Prepared::Prepared;
};

PreparedGemm::PreparedGemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c,
                           const GemmOptions& options) {
  reported_by(kPrepare, [&] { state_ = std::make_unique<State>(a, b, c, options, kPrepare); });
}

PreparedGemm::~PreparedGemm() = default;
PreparedGemm::PreparedGemm(PreparedGemm&&) noexcept = default;
PreparedGemm& PreparedGemm::operator=(PreparedGemm&&) noexcept = default;

void PreparedGemm::run(const void* a, const void* b, void* c, cudaStream_t stream, void* workspace) const {
  constexpr const char* kRun = "coda::PreparedGemm::run";
  reported_by(kRun, [&] {
    if (!state_) throw InvalidArgument(kRun, "the PreparedGemm was moved from");
    state_->run(a, b, c, stream, workspace, kRun);
  });
}

const GemmPlan& PreparedGemm::plan() const {
  if (!state_) throw InvalidArgument("coda::PreparedGemm::plan", "the PreparedGemm was moved from");
  return state_->launch.summary;
}

void gemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c, cudaStream_t stream,
          const GemmOptions& options) {
  reported_by(kGemm, [&] {
    Prepared(a, b, c, options, kGemm).run(a.view.data, b.view.data, c.data, stream, options.workspace, kGemm);
  });
}

Status try_gemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c, cudaStream_t stream,
                const GemmOptions& options) {
  return status_of(kGemm, [&] { gemm(a, b, c, stream, options); });
}

}  // namespace coda
