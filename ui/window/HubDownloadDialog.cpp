// File → Open from the Hugging Face Hub… (ui/window/HubDialogs.hpp).
#include <QCompleter>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "core/hub/hub_cache.hpp"
#include "core/io/error.hpp"
#include "ui/common/Background.hpp"
#include "ui/common/Format.hpp"
#include "ui/window/HubDialogs.hpp"

namespace attnviz::ui {

namespace {

QString bytesText(qint64 n) {
    if (n < 0) return QStringLiteral("?");
    if (n >= 1000000000) return QStringLiteral("%1 GB").arg(double(n) / 1e9, 0, 'f', 2);
    if (n >= 1000000) return QStringLiteral("%1 MB").arg(double(n) / 1e6, 0, 'f', 1);
    if (n >= 1000) return QStringLiteral("%1 kB").arg(double(n) / 1e3, 0, 'f', 1);
    return QStringLiteral("%1 B").arg(n);
}

QString etaText(double s) {
    if (s < 0) return QStringLiteral("?");
    if (s < 60) return QStringLiteral("%1 s").arg(qRound(s));
    if (s < 3600) return QStringLiteral("%1 min %2 s").arg(int(s) / 60).arg(int(s) % 60, 2, 10, QLatin1Char('0'));
    return QStringLiteral("%1 h %2 min").arg(int(s) / 3600).arg(int(s) % 3600 / 60, 2, 10, QLatin1Char('0'));
}

}  // namespace

HubDownloadDialog::HubDownloadDialog(QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Open from the Hugging Face Hub"));
    setObjectName(QStringLiteral("hubDownloadDialog"));
    m_idEdit = new QLineEdit(this);
    m_idEdit->setObjectName(QStringLiteral("hubModelId"));
    m_idEdit->setPlaceholderText(QStringLiteral("Helsinki-NLP/opus-mt-en-de"));
    auto* completer = new QCompleter(completions(), this);
    completer->setCaseSensitivity(Qt::CaseInsensitive);
    completer->setFilterMode(Qt::MatchContains);
    m_idEdit->setCompleter(completer);
    m_revisionEdit = new QLineEdit(QStringLiteral("main"), this);
    m_files = new QTreeWidget(this);
    m_files->setHeaderLabels({tr("File"), tr("Size"), tr("")});
    m_files->setRootIsDecorated(false);
    m_files->header()->setSectionResizeMode(0, QHeaderView::Stretch);
    m_files->setMinimumHeight(160);
    m_summary = new QLabel(tr("Type a model id (ORGANISATION/NAME) and list its files: only what a model needs is "
                              "downloaded, into the cache transformers uses too."),
                           this);
    m_summary->setWordWrap(true);
    m_progress = new QProgressBar(this);
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_progress->setTextVisible(false);
    m_status = new QLabel(this);
    m_error = new QLabel(this);
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color: #b00020"));
    m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);

    m_listButton = new QPushButton(tr("&List files"), this);
    m_downloadButton = new QPushButton(tr("&Download and open"), this);
    m_downloadButton->setDefault(true);
    m_cancelButton = new QPushButton(tr("Cancel"), this);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_listButton);
    buttons->addStretch(1);
    buttons->addWidget(m_downloadButton);
    buttons->addWidget(m_cancelButton);

    auto* form = new QFormLayout;
    form->addRow(tr("&Model"), m_idEdit);
    form->addRow(tr("&Revision"), m_revisionEdit);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(m_summary);
    layout->addWidget(m_files, 1);
    layout->addWidget(m_progress);
    layout->addWidget(m_status);
    layout->addWidget(m_error);
    layout->addLayout(buttons);
    resize(560, 440);

    connect(m_listButton, &QPushButton::clicked, this, &HubDownloadDialog::listFiles);
    connect(m_downloadButton, &QPushButton::clicked, this, &HubDownloadDialog::startDownload);
    connect(m_cancelButton, &QPushButton::clicked, this, &HubDownloadDialog::cancel);
    connect(m_idEdit, &QLineEdit::returnPressed, this, &HubDownloadDialog::listFiles);
    connect(&m_watcher, &QFutureWatcherBase::finished, this, &HubDownloadDialog::onFinished);
}

HubDownloadDialog::~HubDownloadDialog() {
    // No download outlives the dialog: it stops at its next chunk, keeping its .incomplete file.
    m_cancel->store(true);
    m_watcher.waitForFinished();
}

void HubDownloadDialog::setModelId(const QString& id, const QString& revision) {
    m_idEdit->setText(id);
    m_revisionEdit->setText(revision.isEmpty() ? QStringLiteral("main") : revision);
}

QStringList HubDownloadDialog::completions() const {
    QStringList ids;
    for (const auto& cache : hub::cache_dirs())
        for (const auto& m : hub::scan_cache(cache))
            if (!ids.contains(qs(m.id))) ids << qs(m.id);
    return ids;
}

QString HubDownloadDialog::errorText() const { return m_error->text(); }
QString HubDownloadDialog::statusText() const { return m_status->text(); }
int HubDownloadDialog::listedFiles() const { return m_files->topLevelItemCount(); }

hub::DownloadOptions HubDownloadDialog::options() const {
    hub::DownloadOptions o;
    o.repo_id = ss(m_idEdit->text().trimmed());
    o.revision = ss(m_revisionEdit->text().trimmed());
    if (o.revision.empty()) o.revision = "main";
    return o;
}

void HubDownloadDialog::listFiles() {
    if (m_busy) return;
    m_downloadAfterListing = false;
    run(false);
}

void HubDownloadDialog::startDownload() {
    if (m_busy) return;
    const auto o = options();
    if (!m_plan || m_planKey != qs(o.repo_id + "@" + o.revision)) {
        m_downloadAfterListing = true;  // the files first: the list shows what is fetched
        run(false);
        return;
    }
    run(true);
}

void HubDownloadDialog::cancel() {
    if (!m_busy) {
        reject();
        return;
    }
    m_cancel->store(true);
    m_status->setText(tr("Cancelling…"));
}

void HubDownloadDialog::setBusy(bool busy) {
    m_busy = busy;
    m_idEdit->setEnabled(!busy);
    m_revisionEdit->setEnabled(!busy);
    m_listButton->setEnabled(!busy);
    m_downloadButton->setEnabled(!busy);
    m_cancelButton->setText(busy ? tr("Cancel") : tr("Close"));
}

void HubDownloadDialog::run(bool download) {
    const hub::DownloadOptions o = options();
    m_error->clear();
    if (!hub::is_repo_id(o.repo_id)) {
        m_error->setText(tr("%1 is not a model id: ORGANISATION/NAME, e.g. Helsinki-NLP/opus-mt-en-de")
                             .arg(qs(quote(o.repo_id))));
        Q_EMIT listed();
        return;
    }
    m_cancel = std::make_shared<std::atomic<bool>>(false);
    m_downloading = download;
    m_bytesDone = 0;
    setBusy(true);
    m_progress->setValue(0);
    m_status->setText(download ? tr("Downloading %1…").arg(qs(o.repo_id)) : tr("Asking the hub about %1…").arg(qs(o.repo_id)));
    auto plan = m_plan;
    // The callback runs on the worker: it hands a copy to the GUI thread and says whether to go on.
    auto cancelFlag = m_cancel;
    const hub::DownloadCallback progress = [this, cancelFlag](const hub::DownloadProgress& p) {
        if (cancelFlag->load()) return false;
        QMetaObject::invokeMethod(this, [this, p] { showProgress(p); }, Qt::QueuedConnection);
        return true;
    };
    m_watcher.setFuture(QtConcurrent::run(backgroundPool(), [o, download, plan, progress]() {
        yieldToGuiThread();
        Outcome out;
        try {
            if (download) {
                out.plan = *plan;
                out.snapshot = hub::download(o, *plan, progress);
            } else {
                out.plan = hub::plan_download(o, progress);
            }
        } catch (const Cancelled&) {
            out.cancelled = true;
        } catch (const std::exception& e) {
            out.error = e.what();
        }
        return out;
    }));
}

void HubDownloadDialog::showProgress(const hub::DownloadProgress& p) {
    if (!m_downloading) {
        if (!p.note.empty()) m_status->setText(qs(p.note));
        return;
    }
    m_bytesDone = p.done;
    m_progress->setValue(p.total > 0 ? int(1000.0 * double(p.done) / double(p.total)) : 0);
    QString line = tr("%1 of %2").arg(bytesText(p.done), bytesText(p.total));
    if (p.bytes_per_second > 0)
        line += tr("  ·  %1/s  ·  %2 left").arg(bytesText(qint64(p.bytes_per_second)), etaText(p.eta_s));
    line += tr("  ·  %1 (%2 of %3)").arg(qs(p.file)).arg(p.file_index + 1).arg(p.file_count);
    if (!p.note.empty() && p.note != "done") line += QStringLiteral("  ·  ") + qs(p.note);
    m_status->setText(line);
}

void HubDownloadDialog::onFinished() {
    const Outcome out = m_watcher.result();
    const bool download = m_downloading;
    m_downloading = false;
    setBusy(false);
    if (out.cancelled) {
        m_status->setText(download ? tr("Cancelled: what came is kept, and the next download resumes from there.")
                                   : tr("Cancelled."));
        if (download) Q_EMIT downloadFinished(false);
        else Q_EMIT listed();
        return;
    }
    if (!out.error.empty()) {
        m_error->setText(qs(escape_controls(out.error)));
        m_status->clear();
        if (download) Q_EMIT downloadFinished(false);
        else Q_EMIT listed();
        return;
    }
    if (!download) {
        m_plan = std::make_shared<const hub::DownloadPlan>(out.plan);
        m_planKey = qs(out.plan.repo_id + "@" + out.plan.revision);
        m_files->clear();
        for (const auto& f : out.plan.files) {
            auto* item = new QTreeWidgetItem(m_files, {qs(f.name), bytesText(f.size), f.cached ? tr("cached") : QString()});
            item->setTextAlignment(1, Qt::AlignRight | Qt::AlignVCenter);
        }
        m_summary->setText(tr("%1 at %2: %3 files, %4; %5 to download into %6")
                               .arg(qs(out.plan.repo_id), qs(out.plan.commit.substr(0, 12)))
                               .arg(out.plan.files.size())
                               .arg(bytesText(out.plan.total_bytes), bytesText(out.plan.missing_bytes),
                                    qs(out.plan.cache_dir)));
        m_status->setText(out.plan.from_cache ? tr("Offline (HF_HUB_OFFLINE): the cached copy.") : QString());
        Q_EMIT listed();
        if (m_downloadAfterListing) {
            m_downloadAfterListing = false;
            run(true);
        }
        return;
    }
    m_progress->setValue(1000);
    m_status->setText(tr("Downloaded %1: opening it.").arg(qs(m_plan->repo_id)));
    Q_EMIT downloadFinished(true);
    Q_EMIT modelReady(qs(out.snapshot));
    accept();
}

}  // namespace attnviz::ui
