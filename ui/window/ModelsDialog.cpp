// File → Models… (ui/window/HubDialogs.hpp): the local Hugging Face caches as
// huggingface-cli scan-cache lists them; open or delete a revision.
#include <QDateTime>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "core/hub/hub_cache.hpp"
#include "core/io/message.hpp"
#include "ui/common/Format.hpp"
#include "ui/window/HubDialogs.hpp"

namespace attnviz::ui {

namespace {

enum Column { IdColumn, RefsColumn, SizeColumn, UsedColumn };
constexpr int kCacheRole = Qt::UserRole;      ///< the cache folder of a model row
constexpr int kSnapshotRole = Qt::UserRole + 1;  ///< a revision's snapshot folder
constexpr int kCommitRole = Qt::UserRole + 2;

QString sizeText(qint64 n) {
    if (n >= 1000000000) return QStringLiteral("%1 GB").arg(double(n) / 1e9, 0, 'f', 2);
    if (n >= 1000000) return QStringLiteral("%1 MB").arg(double(n) / 1e6, 0, 'f', 1);
    if (n >= 1000) return QStringLiteral("%1 kB").arg(double(n) / 1e3, 0, 'f', 1);
    return QStringLiteral("%1 B").arg(n);
}

QString whenText(double epoch) {
    if (epoch <= 0) return QStringLiteral("-");
    return QDateTime::fromMSecsSinceEpoch(qint64(epoch * 1000)).toString(QStringLiteral("yyyy-MM-dd HH:mm"));
}

}  // namespace

ModelsDialog::ModelsDialog(QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Models in the Hugging Face cache"));
    setObjectName(QStringLiteral("modelsDialog"));
    m_tree = new QTreeWidget(this);
    m_tree->setHeaderLabels({tr("Model / revision"), tr("Refs"), tr("Size"), tr("Last used")});
    m_tree->header()->setSectionResizeMode(IdColumn, QHeaderView::Stretch);
    m_tree->setSelectionMode(QAbstractItemView::SingleSelection);
    m_status = new QLabel(this);
    m_status->setWordWrap(true);
    m_openButton = new QPushButton(tr("&Open"), this);
    m_deleteButton = new QPushButton(tr("&Delete…"), this);
    auto* refreshButton = new QPushButton(tr("&Refresh"), this);
    auto* close = new QPushButton(tr("Close"), this);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(refreshButton);
    buttons->addStretch(1);
    buttons->addWidget(m_deleteButton);
    buttons->addWidget(m_openButton);
    buttons->addWidget(close);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(m_tree, 1);
    layout->addWidget(m_status);
    layout->addLayout(buttons);
    resize(680, 420);
    m_confirm = [this](const QString& question) {
        return QMessageBox::question(this, tr("Delete from the cache"), question) == QMessageBox::Yes;
    };
    connect(refreshButton, &QPushButton::clicked, this, &ModelsDialog::refresh);
    connect(close, &QPushButton::clicked, this, &QDialog::reject);
    connect(m_openButton, &QPushButton::clicked, this, &ModelsDialog::openSelected);
    connect(m_deleteButton, &QPushButton::clicked, this, &ModelsDialog::deleteSelected);
    connect(m_tree, &QTreeWidget::itemSelectionChanged, this, &ModelsDialog::updateButtons);
    connect(m_tree, &QTreeWidget::itemDoubleClicked, this, [this](QTreeWidgetItem* item) {
        if (item->parent()) openSelected();
    });
    refresh();
}

void ModelsDialog::refresh() {
    m_tree->clear();
    qint64 total = 0;
    int models = 0;
    for (const auto& cache : hub::cache_dirs()) {
        for (const auto& m : hub::scan_cache(cache)) {
            ++models;
            total += m.size_on_disk;
            auto* row = new QTreeWidgetItem(m_tree, {qs(escape_controls(m.id)), QString(), sizeText(m.size_on_disk),
                                                     whenText(m.last_used)});
            row->setData(IdColumn, kCacheRole, qs(cache));
            row->setData(IdColumn, kCommitRole, qs(m.id));
            row->setToolTip(IdColumn, qs(m.path));
            for (const auto& r : m.revisions) {
                QStringList refs;
                for (const auto& ref : r.refs) refs << qs(escape_controls(ref));
                auto* rev = new QTreeWidgetItem(row, {qs(escape_controls(r.commit.substr(0, 12))), refs.join(QStringLiteral(", ")),
                                                      sizeText(r.size), whenText(r.last_modified)});
                rev->setData(IdColumn, kSnapshotRole, qs(m.path + "/snapshots/" + r.commit));
                rev->setData(IdColumn, kCommitRole, qs(r.commit));
                rev->setToolTip(IdColumn, tr("%1 files").arg(r.files.size()));
            }
            row->setExpanded(true);
        }
    }
    for (int c = RefsColumn; c <= UsedColumn; ++c) m_tree->resizeColumnToContents(c);
    m_status->setText(models ? tr("%1 models, %2 on disk. Deleting a revision removes the files no other revision "
                                  "uses (as huggingface-cli delete-cache does).")
                                   .arg(models)
                                   .arg(sizeText(total))
                             : tr("No models in the cache yet: File → Open from the Hugging Face Hub… downloads one."));
    updateButtons();
}

int ModelsDialog::modelCount() const { return m_tree->topLevelItemCount(); }
QString ModelsDialog::statusText() const { return m_status->text(); }

bool ModelsDialog::selectRevision(const QString& id, const QString& commitOrRef) {
    for (int i = 0; i < m_tree->topLevelItemCount(); ++i) {
        QTreeWidgetItem* row = m_tree->topLevelItem(i);
        if (row->data(IdColumn, kCommitRole).toString() != id) continue;
        for (int j = 0; j < row->childCount(); ++j) {
            QTreeWidgetItem* rev = row->child(j);
            if (rev->data(IdColumn, kCommitRole).toString() == commitOrRef ||
                rev->text(RefsColumn).split(QStringLiteral(", ")).contains(commitOrRef)) {
                m_tree->setCurrentItem(rev);
                return true;
            }
        }
    }
    return false;
}

void ModelsDialog::updateButtons() {
    QTreeWidgetItem* item = m_tree->currentItem();
    const bool selected = item && !m_tree->selectedItems().isEmpty();
    m_openButton->setEnabled(selected && item->parent());
    m_deleteButton->setEnabled(selected);
}

void ModelsDialog::openSelected() {
    QTreeWidgetItem* item = m_tree->currentItem();
    if (!item || !item->parent()) return;
    Q_EMIT openRequested(item->data(IdColumn, kSnapshotRole).toString());
    accept();
}

void ModelsDialog::deleteSelected() {
    QTreeWidgetItem* item = m_tree->currentItem();
    if (!item) return;
    QTreeWidgetItem* row = item->parent() ? item->parent() : item;
    const QString id = row->data(IdColumn, kCommitRole).toString();
    const QString cache = row->data(IdColumn, kCacheRole).toString();
    const QString commit = item->parent() ? item->data(IdColumn, kCommitRole).toString() : QString();
    const QString question = commit.isEmpty()
                                 ? tr("Delete every revision of %1 from %2?").arg(id, cache)
                                 : tr("Delete revision %1 of %2 from %3? Files that another revision uses are kept.")
                                       .arg(commit.left(12), id, cache);
    if (!m_confirm(question)) return;
    try {
        const hub::DeleteResult d = hub::delete_revision(ss(cache), ss(id), ss(commit));
        refresh();
        m_status->setText(tr("Deleted %1 (%2 freed).").arg(commit.isEmpty() ? id : id + QLatin1Char(' ') + commit.left(12),
                                                            sizeText(d.freed)));
    } catch (const std::exception& e) {
        refresh();
        m_status->setText(qs(escape_controls(e.what())));
    }
}

}  // namespace attnviz::ui
