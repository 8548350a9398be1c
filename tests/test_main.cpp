// doctest main for the suites. ctest runs each test case by name (doctest_discover_tests); a
// name the filter fails to match would otherwise "pass" having run nothing, so a run in which
// no test case passes the filters fails.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

unsigned g_selected = 0;

struct SelectedCounter : doctest::IReporter {
  explicit SelectedCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    g_selected = stats.numTestCasesPassingFilters;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("selected-counter", 1, SelectedCounter);

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  int result = context.run();
  if (context.shouldExit()) return result;
  if (result == 0 && g_selected == 0) {
    std::fprintf(stderr, "no test case matched the filters: check the test name\n");
    return 1;
  }
  return result;
}
