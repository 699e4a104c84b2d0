// A program's companion launch (plan.hpp): how many tile rows it takes, and the two launches'
// plans over their rows.
#include "coda/epilogue/plan.hpp"

#include <algorithm>

#include "coda/core/device.hpp"
#include "coda/epilogue/companion.hpp"

namespace coda::epilogue {

void plan_companion(ProgramPlan& plan, const GemmOperand& a, const GemmOperand& b, const GemmOptions& options,
                    double companion_speed, const char* function) {
  const mainloop::LaunchPlan& main = plan.main;
  const mainloop::ScheduleParams& s = main.schedule;
  if (!options.companion || options.max_ctas > 0 || plan.companion_ctas() > 0 ||
      main.summary.tile != GemmTile::pingpong_m128n128 || s.splits != 1 || s.stream_k_tiles != 0 || s.batches != 1)
    return;
  const int primary_ctas = mainloop::resident_ctas(GemmTile::pingpong_m128n128);
  const int idle_ctas = (current_device().sm_count - primary_ctas) / 2 * 2;  // whole 2-CTA clusters
  if (main.summary.ctas != primary_ctas) return;                             // the primary's grid does not fill its SMs
  const int64_t rows = companion_tile_rows(s.tiles_m, s.tiles_n, primary_ctas, idle_ctas, companion_speed);
  if (rows == 0) return;
  const int32_t primary_rows = int32_t(s.tiles_m - rows);  // even (companion_tile_rows)

  GemmOptions companion_options = options;
  companion_options.tile = GemmTile::m128n256;
  companion_options.split_k = 1;
  companion_options.stream_k = false;
  companion_options.max_ctas = idle_ctas;
  plan.companion =
      mainloop::over_rows(mainloop::plan_launch(a, b, companion_options, function), {primary_rows, -1}, function);
  plan.companion.role = mainloop::LaunchRole::companion;
  plan.main = mainloop::over_rows(main, {0, primary_rows}, function);
  plan.main.role = mainloop::LaunchRole::primary;
}

}  // namespace coda::epilogue
