#include "coda/reference/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "coda/reference/reductions.hpp"
#include "reference/checks.hpp"

namespace coda::reference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void check_options(ArgumentCheck& check, const CrossEntropyOptions& options) {
  check.require(options.label_smoothing >= 0 && options.label_smoothing < 1, "options.label_smoothing", "is ",
                options.label_smoothing, " but must lie in [0, 1)");
  check.require(std::isfinite(options.z_loss) && options.z_loss >= 0, "options.z_loss", "is ", options.z_loss,
                " but must be finite and >= 0");
  check.require(std::isfinite(options.softcap) && options.softcap >= 0, "options.softcap", "is ", options.softcap,
                " but must be finite and >= 0 (0 turns soft-capping off)");
}

void check_targets(ArgumentCheck& check, const std::vector<int32_t>& targets, int64_t rows, int64_t vocab,
                   int32_t ignore_index) {
  checks::require_length(check, "targets", targets.size(), rows, "one target per row of the logits");
  for (std::size_t m = 0; m < targets.size() && !check.failed(); ++m)
    check.require(targets[m] == ignore_index || (targets[m] >= 0 && targets[m] < vocab), "targets", "targets[", m,
                  "] = ", targets[m], " is outside [0, ", vocab, ") and is not ignore_index (", ignore_index, ")");
}

// What every entry point that reads the logits checks about them, the targets and the options.
void check_logits_and_targets(ArgumentCheck& check, const Matrix& logits, const std::vector<int32_t>& targets,
                              const CrossEntropyOptions& options) {
  check.require(logits.cols >= 1, "logits", "must have at least one column (the vocabulary)");
  check_options(check, options);
  check_targets(check, targets, logits.rows, logits.cols, options.ignore_index);
}

double soft_capped(double z, double cap) { return cap > 0 ? cap * std::tanh(z / cap) : z; }

Matrix soft_capped(const Matrix& logits, double cap) {
  Matrix y = logits;
  for (double& v : y.data) v = soft_capped(v, cap);
  return y;
}

// log sum exp(x) over [begin, end), shifted by the maximum so nothing overflows.
double logsumexp(const double* begin, const double* end) {
  double top = -std::numeric_limits<double>::infinity();
  for (const double* x = begin; x != end; ++x) {
    if (std::isnan(*x)) return kNaN;
    top = std::max(top, *x);
  }
  if (std::isinf(top)) return top;  // all -inf, or a +inf: the shift would give NaN
  double sum = 0;
  for (const double* x = begin; x != end; ++x) sum += std::exp(*x - top);
  return top + std::log(sum);
}

bool ignored(int32_t target, const CrossEntropyOptions& options) { return target == options.ignore_index; }

// Y[m, target[m]] of every row; 0 on ignored rows.
Vector target_logits(const Matrix& y, const std::vector<int32_t>& targets, const CrossEntropyOptions& options) {
  Vector out(std::size_t(y.rows), 0.0);
  for (int64_t m = 0; m < y.rows; ++m) {
    const int32_t t = targets[std::size_t(m)];
    if (!ignored(t, options)) out[std::size_t(m)] = y(m, t);
  }
  return out;
}

// The loss of one row from its three statistics (see the header for the formula).
double row_loss(double lse, double target_logit, double row_sum, int64_t vocab, const CrossEntropyOptions& options) {
  const double eps = options.label_smoothing;
  return lse - (1 - eps) * target_logit - (eps / double(vocab)) * row_sum + options.z_loss * lse * lse;
}

// Per-row losses from the row statistics, and the requested reduction.
CrossEntropyLoss assemble_loss(const Vector& lse, const Vector& target_logit, const Vector& row_sum,
                               const std::vector<int32_t>& targets, int64_t vocab, const CrossEntropyOptions& options) {
  CrossEntropyLoss out;
  out.lse = lse;
  out.per_row.assign(lse.size(), 0.0);
  double total = 0;
  for (std::size_t m = 0; m < lse.size(); ++m) {
    if (ignored(targets[m], options)) continue;
    out.per_row[m] = row_loss(lse[m], target_logit[m], row_sum[m], vocab, options);
    total += out.per_row[m];
    ++out.valid_rows;
  }
  if (options.reduction == LossReduction::sum) out.reduced = total;
  if (options.reduction == LossReduction::mean)
    out.reduced = out.valid_rows > 0 ? total / double(out.valid_rows) : kNaN;
  return out;
}

// dloss[m]: the gradient that reaches row m's loss through the reduction.
Vector row_loss_gradients(const Vector& grad_output, const std::vector<int32_t>& targets,
                          const CrossEntropyOptions& options) {
  int64_t valid_rows = 0;
  for (int32_t t : targets) valid_rows += ignored(t, options) ? 0 : 1;
  Vector dloss(targets.size(), 0.0);
  for (std::size_t m = 0; m < targets.size(); ++m) {
    if (ignored(targets[m], options)) continue;
    switch (options.reduction) {
      case LossReduction::none: dloss[m] = grad_output[m]; break;
      case LossReduction::sum: dloss[m] = grad_output[0]; break;
      case LossReduction::mean: dloss[m] = grad_output[0] / double(valid_rows); break;
    }
  }
  return dloss;
}

}  // namespace

CrossEntropyPartials cross_entropy_partials(const Matrix& logits, const std::vector<int32_t>& targets, int64_t bn,
                                            const CrossEntropyOptions& options) {
  ArgumentCheck check("coda::reference::cross_entropy_partials");
  check_logits_and_targets(check, logits, targets, options);
  checks::require_tile_size(check, "bn", bn);
  check.throw_if_error();
  const Matrix y = soft_capped(logits, options.softcap);
  CrossEntropyPartials out;
  out.lse = row_partials(y.rows, y.cols, bn, [&](int64_t m, int64_t begin, int64_t end) {
    return logsumexp(y.row(m) + begin, y.row(m) + end);
  });
  out.row_sums = row_partial_sums(y, bn);
  out.target_logit = target_logits(y, targets, options);
  return out;
}

CrossEntropyLoss cross_entropy_finish(const CrossEntropyPartials& partials, const std::vector<int32_t>& targets,
                                      int64_t vocab, const CrossEntropyOptions& options) {
  ArgumentCheck check("coda::reference::cross_entropy_finish");
  check.positive("vocab", vocab, "vocab");
  check_options(check, options);
  const int64_t rows = partials.lse.rows, tiles = partials.lse.cols;
  check.require(tiles >= 1 && tiles <= vocab, "partials.lse", "has ", tiles, " tiles but a vocabulary of ", vocab,
                " has 1 to ", vocab);
  checks::require_shape(check, "partials.row_sums", partials.row_sums, rows, tiles, "the shape of partials.lse");
  checks::require_length(check, "partials.target_logit", partials.target_logit.size(), rows, "one per row");
  check_targets(check, targets, rows, vocab, options.ignore_index);
  check.throw_if_error();

  Vector lse(static_cast<std::size_t>(rows));
  for (int64_t m = 0; m < rows; ++m) lse[std::size_t(m)] = logsumexp(partials.lse.row(m), partials.lse.row(m) + tiles);
  return assemble_loss(lse, partials.target_logit, combine_row_partials(partials.row_sums, Combine::sum), targets,
                       vocab, options);
}

CrossEntropyLoss cross_entropy(const Matrix& logits, const std::vector<int32_t>& targets,
                               const CrossEntropyOptions& options) {
  ArgumentCheck check("coda::reference::cross_entropy");
  check_logits_and_targets(check, logits, targets, options);
  check.throw_if_error();
  const Matrix y = soft_capped(logits, options.softcap);
  Vector lse(static_cast<std::size_t>(y.rows));
  for (int64_t m = 0; m < y.rows; ++m) lse[std::size_t(m)] = logsumexp(y.row(m), y.row(m) + y.cols);
  return assemble_loss(lse, target_logits(y, targets, options), row_sums(y), targets, y.cols, options);
}

CrossEntropyBackward cross_entropy_backward(const Matrix& logits, const std::vector<int32_t>& targets,
                                            const Vector& lse, const Vector& grad_output, int64_t bn,
                                            const CrossEntropyOptions& options) {
  ArgumentCheck check("coda::reference::cross_entropy_backward");
  check_logits_and_targets(check, logits, targets, options);
  checks::require_length(check, "lse", lse.size(), logits.rows, "one saved lse per row of the logits");
  checks::require_length(check, "grad_output", grad_output.size(),
                         options.reduction == LossReduction::none ? logits.rows : 1,
                         options.reduction == LossReduction::none ? "reduction none: one gradient per row"
                                                                  : "reduction sum or mean: one scalar gradient");
  checks::require_tile_size(check, "bn", bn);
  check.throw_if_error();

  const double eps = options.label_smoothing, cap = options.softcap;
  const double vocab = double(logits.cols);
  const Vector dloss = row_loss_gradients(grad_output, targets, options);
  CrossEntropyBackward out{Matrix(logits.rows, logits.cols), Matrix()};
  for (int64_t m = 0; m < logits.rows; ++m) {
    const int32_t t = targets[std::size_t(m)];
    if (ignored(t, options)) continue;
    const double row_lse = lse[std::size_t(m)];
    for (int64_t n = 0; n < logits.cols; ++n) {
      const double z = logits(m, n);
      const double p = std::exp(soft_capped(z, cap) - row_lse);
      const double q = (1 - eps) * (n == t ? 1.0 : 0.0) + eps / vocab;
      const double dy = (p - q + 2 * options.z_loss * row_lse * p) * dloss[std::size_t(m)];
      const double capping_slope = cap > 0 ? 1.0 - std::pow(std::tanh(z / cap), 2) : 1.0;
      out.grad_logits(m, n) = dy * capping_slope;
    }
  }
  out.row_partials = row_partial_dots(logits, out.grad_logits, bn);
  return out;
}

}  // namespace coda::reference
