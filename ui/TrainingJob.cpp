#include "ui/TrainingJob.hpp"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/device.hpp"

namespace attnviz::ui {

std::atomic<int> g_detachedWorkers{0};

namespace {

void serveSave(TrainingJob& job, Trainer& trainer) {
    std::string path;
    {
        std::lock_guard<std::mutex> lock(job.mutex);
        path.swap(job.pendingSave);
    }
    if (path.empty()) return;
    TrainingJob::SaveResult result{true, path, {}};
    try {
        save_checkpoint(trainer, path);
    } catch (const std::exception& e) {
        result.ok = false;
        result.error = e.what();
    }
    std::lock_guard<std::mutex> lock(job.mutex);
    job.saves.push_back(std::move(result));
}

/// Runs on the training thread: records, never calls into Qt.
class BufferingObserver : public TrainObserver {
public:
    BufferingObserver(TrainingJob& job, Trainer& trainer) : m_job(job), m_trainer(trainer) {}

    void on_batch(const BatchReport& r) override {
        {
            std::lock_guard<std::mutex> lock(m_job.mutex);
            m_job.points.emplace_back(r.global_step, r.loss);
            m_job.lastBatch = r;
            m_job.lastStep = r.global_step;
        }
        serveSave(m_job, m_trainer);  // between two batches the weights are consistent
    }
    void on_epoch(const EpochReport& r) override {
        std::lock_guard<std::mutex> lock(m_job.mutex);
        m_job.epochs.emplace_back(r, m_job.lastStep);
    }
    void on_snapshot(int epoch, int64_t step) override {
        std::string probe;
        {
            std::lock_guard<std::mutex> lock(m_job.mutex);
            m_job.snapshotNew = true;
            m_job.snapshotEpoch = epoch;
            m_job.snapshotStep = step;
            probe = m_job.probe;
        }
        if (probe.empty()) return;
        // The probe is translated here, on the worker, so the GUI only draws it.
        auto snapshot = m_trainer.snapshot();
        if (!snapshot) return;
        try {
            const auto& d = m_trainer.data();
            auto result = translate(*snapshot, d.src_vocab, d.tgt_vocab, d.level, {probe});
            if (result.empty()) return;
            ProbeSnapshot p{epoch, step, std::make_shared<const Translation>(std::move(result.front()))};
            std::lock_guard<std::mutex> lock(m_job.mutex);
            m_job.probes.push_back(std::move(p));
        } catch (const std::exception&) {
            // A probe that cannot be translated (e.g. invalid UTF-8) is simply not shown.
        }
    }
    void on_paused(bool paused) override {
        std::lock_guard<std::mutex> lock(m_job.mutex);
        m_job.pausedEvents.push_back(paused);
    }
    void on_finished(StopReason reason, const std::string& message) override {
        std::lock_guard<std::mutex> lock(m_job.mutex);
        m_job.reason = reason;
        m_job.message = message;
    }

private:
    TrainingJob& m_job;
    Trainer& m_trainer;
};

}  // namespace

void runTrainingJob(std::shared_ptr<TrainingJob> job) {
    pthread_setname_np(pthread_self(), "attnviz-train");
    // Training yields to the GUI when the cores are busy: a lower priority for this thread
    // (and the LibTorch threads it starts) keeps the window responsive on a small machine.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 5);
    std::shared_ptr<Trainer> trainer;
    try {
        if (job->existing) {
            trainer = job->existing;
            trainer->set_train_config(job->train);
        } else {
            TrainingData data = prepare_data(*job->corpus, job->train);
            if (job->checkpoint) trainer = resume_trainer(*job->checkpoint, std::move(data), job->train);
            else trainer = std::make_shared<Trainer>(std::move(data), job->model, job->train);
        }
        const std::string device = describe_device(trainer->device());
        {
            std::lock_guard<std::mutex> lock(job->mutex);
            job->trainer = trainer;
            job->device = device;
            job->deviceNew = true;
            if (job->pauseRequested) trainer->pause();
            if (job->stopRequested) trainer->stop();
        }
        BufferingObserver observer(*job, *trainer);
        const StopReason reason = trainer->run(&observer);
        if (reason == StopReason::finished || reason == StopReason::stopped) {
            // The last weights (a stopped epoch's too) become what Translate and Save use.
            trainer->publish_snapshot();
            observer.on_snapshot(trainer->history().epochs_done, trainer->history().global_step);  // + the probe
        }
        serveSave(*job, *trainer);
    } catch (const std::exception& e) {
        std::string msg = e.what();
        if (auto pos = msg.find("\nException raised from"); pos != std::string::npos) msg.resize(pos);
        std::lock_guard<std::mutex> lock(job->mutex);
        job->reason = StopReason::error;
        job->message = msg;
    }
    {
        std::lock_guard<std::mutex> lock(job->mutex);
        job->done = true;
        if (job->detached) --g_detachedWorkers;
        if (!job->pendingSave.empty()) {
            job->saves.push_back({false, job->pendingSave, "training ended before the checkpoint could be written"});
            job->pendingSave.clear();
        }
    }
    job->doneCv.notify_all();
}

}  // namespace attnviz::ui
