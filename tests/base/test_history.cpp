// The training history's bounded loss curve (core/config/bounded_curve.hpp): the
// rule the checkpoint's history and the GUI's chart share.
#include <cmath>

#include "catch_torch.hpp"  // not <catch2/catch.hpp>: see there (unity batches)

#include <nlohmann/json.hpp>

#include "core/config/bounded_curve.hpp"
#include "core/config/history.hpp"
#include "core/io/error.hpp"

using namespace attnviz;
using json = nlohmann::json;

TEST_CASE("a bounded curve averages batches into points and halves them at its bound", "[history]") {
    BoundedCurve c(4);
    CHECK(c.add(1, 1.0));  // stride 1: every batch is a point
    CHECK(c.add(2, 3.0));
    CHECK(c.add(3, 5.0));
    CHECK(c.compact() == 0);
    CHECK(c.add(4, 7.0));
    std::vector<double> beside = {10, 20, 30, 40};
    const int halvings = c.compact();
    REQUIRE(halvings == 1);
    for (int i = 0; i < halvings; ++i) BoundedCurve::halve_beside(beside);
    CHECK(c.points() == std::vector<BoundedCurve::Point>{{2, 2.0}, {4, 6.0}});  // neighbours averaged, later step
    CHECK(beside == std::vector<double>{20, 40});                              // the later of each pair
    CHECK(c.stride() == 2);
    CHECK_FALSE(c.add(5, 9.0));  // pending until two batches are in
    CHECK(c.pending_count() == 1);
    CHECK(c.pending_sum() == 9.0);
    CHECK(c.add(6, 11.0));
    CHECK(c.points().back() == BoundedCurve::Point{6, 10.0});
    CHECK(c.pending_count() == 0);

    // An odd last point goes back to the pending batches when halving.
    BoundedCurve odd(3);
    for (int s = 1; s <= 3; ++s) odd.add(s, double(s));
    std::vector<int> follow = {1, 2, 3};
    REQUIRE(odd.compact() == 1);
    BoundedCurve::halve_beside(follow);
    CHECK(odd.points() == std::vector<BoundedCurve::Point>{{2, 1.5}});
    CHECK(follow == std::vector<int>{2});
    CHECK(odd.pending_count() == 1);  // point 3 (stride 1) joins the doubled stride's bucket
    CHECK(odd.pending_sum() == 3.0);
    CHECK(odd.add(4, 4.0));
    CHECK(odd.points().back() == BoundedCurve::Point{4, 3.5});

    // A restored curve goes on as the one it was saved from.
    BoundedCurve restored(3);
    restored.restore(odd.points(), odd.stride(), odd.pending_sum(), odd.pending_count());
    CHECK(restored == odd);
    restored.add(5, 5.0), odd.add(5, 5.0);
    CHECK(restored == odd);
}

TEST_CASE("the history keeps a bounded loss curve: averaged points, any run length", "[checkpoint]") {
    // Loss = step: a point covering batches a..b holds their mean (a + b) / 2, exactly.
    TrainHistory h;
    const int64_t batches = 50001;
    for (int64_t s = 1; s <= batches; ++s) h.record_batch(s, double(s));
    CHECK(h.batch_loss.size() < TrainHistory::max_batch_points);
    CHECK(h.batch_loss.stride() == 4);  // halved at 20,000 and 40,000 batches
    CHECK(int64_t(h.batch_loss.size()) * h.batch_loss.stride() + h.batch_loss.pending_count() == batches);
    CHECK(h.batch_loss.pending_count() == 1);
    for (size_t i = 0; i < h.batch_loss.size(); ++i) {
        const auto [step, mean] = h.batch_loss.points()[i];
        REQUIRE(step == int64_t(i + 1) * h.batch_loss.stride());
        REQUIRE(mean == double(step) - double(h.batch_loss.stride() - 1) / 2);
    }

    // Through JSON and back, then going on, equals going on straight (the resume test
    // compares whole runs below the bound).
    TrainHistory resumed = TrainHistory::from_json(h.to_json());
    TrainHistory straight = h;
    for (int64_t s = batches + 1; s <= batches + 7; ++s) resumed.record_batch(s, double(s)), straight.record_batch(s, double(s));
    CHECK(resumed.batch_loss.points() == straight.batch_loss.points());
    CHECK(resumed.batch_loss.stride() == straight.batch_loss.stride());
    CHECK(resumed.batch_loss.pending_count() == straight.batch_loss.pending_count());

    // A file from before the bound (one point a batch) is compacted when read; an odd
    // last point goes back to the pending batches, so every point covers as many batches.
    json old = {{"batch_step", json::array()}, {"batch_loss", json::array()}, {"epochs", json::array()}, {"global_step", 45001}};
    for (int s = 1; s <= 45001; ++s) old["batch_step"].push_back(s), old["batch_loss"].push_back(double(s));
    const TrainHistory read = TrainHistory::from_json(old);
    CHECK(read.batch_loss.stride() == 4);
    CHECK(read.batch_loss.size() == 11250);
    CHECK(read.batch_loss.pending_count() == 1);
    CHECK(read.batch_loss.pending_sum() == 45001.0);
    CHECK(read.batch_loss.points().back() == std::pair<int64_t, double>(45000, 44998.5));

    // What is read is checked.
    json bad = h.to_json();
    bad["batch_stride"] = 3;
    CHECK_THROWS_WITH(TrainHistory::from_json(bad), Catch::Contains("batch_stride") && Catch::Contains("power of two"));
    bad["batch_stride"] = 4;
    bad["batch_pending"] = {10.0, 4};
    CHECK_THROWS_WITH(TrainHistory::from_json(bad), Catch::Contains("batch_pending"));
    bad["batch_pending"] = {"x", 1};
    CHECK_THROWS_WITH(TrainHistory::from_json(bad), Catch::Contains("batch_pending"));
    json huge = read.to_json();  // 11,250 points
    huge["batch_stride"] = int64_t(1) << 40;
    huge.erase("batch_pending");
    CHECK(TrainHistory::from_json(huge).batch_loss.stride() == int64_t(1) << 40);
    for (int s = 45001; s <= 45000 + 2 * 9000; ++s) huge["batch_step"].push_back(s), huge["batch_loss"].push_back(1.0);
    CHECK_THROWS_WITH(TrainHistory::from_json(huge), Catch::Contains("too many"));  // compacting would pass the bound
}

TEST_CASE("a pretrained model's start report, with nothing trained yet, goes through JSON and back", "[history]") {
    // The start report (epoch 0: the pretrained model before fine-tuning) has no training loss;
    // NaN is written as null and read back as NaN (a checkpoint of a fine-tuned model loads).
    TrainHistory h;
    EpochReport start;
    start.epoch = 0;
    start.train_loss = std::nan("");
    start.val_loss = 2.5;
    start.val_token_accuracy = std::nan("");
    start.val_bleu = 0.125;
    h.start = start;
    const auto j = h.to_json();
    CHECK(j.at("start").at("train_loss").is_null());
    const TrainHistory back = TrainHistory::from_json(nlohmann::json::parse(j.dump()));
    REQUIRE(back.start.has_value());
    CHECK(std::isnan(back.start->train_loss));
    CHECK(std::isnan(back.start->val_token_accuracy));
    CHECK(back.start->val_loss == 2.5);
    CHECK(back.start->val_bleu == 0.125);
}
