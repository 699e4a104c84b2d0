// Checking that a call is refused: the message of the error it throws.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace coda::test {

/// The message of the `Error` that `call` throws; a test failure naming `what` (and "") when it
/// throws none. Any other exception propagates and fails the test.
///
///   EXPECT_THAT(refusal_of<InvalidArgument>([&] { gemm.run(nullptr, b, c); }, "a null a"), HasSubstr("'a'"));
template <class Error, class Call>
std::string refusal_of(Call&& call, const std::string& what) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "not refused: " << what;
  return "";
}

}  // namespace coda::test
