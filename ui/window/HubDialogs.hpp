#pragma once
// The Hugging Face Hub in the app (core/hub): File → Open from the Hugging Face Hub… (a model id,
// completed from the local cache; its files and sizes listed before anything is fetched; a
// progress bar with bytes, speed and ETA; Cancel) and File → Models… (the cached models, their
// revisions, size and last use; open or delete a revision). The hub is asked and the files
// fetched on the background pool (ui/common/Background.hpp), never on the GUI thread; closing a
// dialog cancels its work and waits for it (a download keeps its .incomplete file and resumes).
#include <QDialog>
#include <QFutureWatcher>
#include <QString>
#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "core/hub/hub_download.hpp"

class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTreeWidget;

namespace attnviz::ui {

/// File → Open from the Hugging Face Hub…: modelReady(snapshot folder) when the download is done.
class HubDownloadDialog : public QDialog {
    Q_OBJECT
public:
    explicit HubDownloadDialog(QWidget* parent = nullptr);
    ~HubDownloadDialog() override;

    /// The id and revision fields (tests and callers fill them).
    void setModelId(const QString& id, const QString& revision = QStringLiteral("main"));
    /// Asks the hub what the model holds (List files); the list fills when it answers.
    void listFiles();
    /// Downloads what listFiles() listed (after listing it first when it has not been).
    void startDownload();
    /// Cancels the work in progress (the dialog stays open), or closes the dialog when idle.
    void cancel();
    /// Whether the hub is being asked or files fetched.
    bool isBusy() const { return m_busy; }
    /// What the dialog shows: the last error ("" none), the status line, the listed files.
    QString errorText() const;
    QString statusText() const;
    int listedFiles() const;
    /// Bytes fetched so far, as the progress bar shows them.
    qint64 bytesDone() const { return m_bytesDone; }
    /// The model ids the completer offers (every model of the local caches).
    QStringList completions() const;

Q_SIGNALS:
    /// The model is in the cache: `snapshot` is its folder (the main window opens it).
    void modelReady(const QString& snapshot);
    /// The files are listed (or the listing failed: errorText()).
    void listed();
    /// A download ended: ok, or failed / cancelled (errorText()).
    void downloadFinished(bool ok);

private:
    struct Outcome {
        std::string error;
        bool cancelled = false;
        std::string snapshot;
        hub::DownloadPlan plan;
    };
    void run(bool download);
    void onFinished();
    void showProgress(const hub::DownloadProgress& p);
    void setBusy(bool busy);
    hub::DownloadOptions options() const;

    QLineEdit* m_idEdit = nullptr;
    QLineEdit* m_revisionEdit = nullptr;
    QTreeWidget* m_files = nullptr;
    QLabel* m_summary = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_error = nullptr;
    QProgressBar* m_progress = nullptr;
    QPushButton* m_listButton = nullptr;
    QPushButton* m_downloadButton = nullptr;
    QPushButton* m_cancelButton = nullptr;
    QFutureWatcher<Outcome> m_watcher;
    std::shared_ptr<std::atomic<bool>> m_cancel = std::make_shared<std::atomic<bool>>(false);
    bool m_busy = false;
    bool m_downloading = false;
    bool m_downloadAfterListing = false;
    std::shared_ptr<const hub::DownloadPlan> m_plan;  ///< what List files found (for the id and revision shown)
    QString m_planKey;                                ///< "id@revision" of m_plan
    qint64 m_bytesDone = 0;
};

/// File → Models…: the cached models; openRequested(snapshot folder) opens one.
class ModelsDialog : public QDialog {
    Q_OBJECT
public:
    explicit ModelsDialog(QWidget* parent = nullptr);

    /// Reads the caches again.
    void refresh();
    /// Rows: one per model, its revisions under it.
    int modelCount() const;
    /// Selects a revision by model id and commit (or ref); false when it is not listed.
    bool selectRevision(const QString& id, const QString& commitOrRef);
    /// Opens / deletes the selected revision (deleting asks the confirm prompt first).
    void openSelected();
    void deleteSelected();
    /// The question asked before deleting (tests answer it): true deletes.
    using ConfirmPrompt = std::function<bool(const QString& question)>;
    void setConfirmPrompt(ConfirmPrompt prompt) { m_confirm = std::move(prompt); }
    QString statusText() const;

Q_SIGNALS:
    void openRequested(const QString& snapshot);

private:
    void updateButtons();
    QTreeWidget* m_tree = nullptr;
    QLabel* m_status = nullptr;
    QPushButton* m_openButton = nullptr;
    QPushButton* m_deleteButton = nullptr;
    ConfirmPrompt m_confirm;
};

}  // namespace attnviz::ui
