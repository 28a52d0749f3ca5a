#include "ui/SettingsPanel.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QSettings>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QVBoxLayout>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/device.hpp"
#include "ui/Format.hpp"

namespace attnviz::ui {
namespace {

QSpinBox* spin(QWidget* parent, int lo, int hi, const QString& tip) {
    auto* s = new QSpinBox(parent);
    s->setRange(lo, hi);
    s->setToolTip(tip);
    s->setAccelerated(true);
    return s;
}

QDoubleSpinBox* dspin(QWidget* parent, double lo, double hi, double step, int decimals, const QString& tip) {
    auto* s = new QDoubleSpinBox(parent);
    s->setRange(lo, hi);
    s->setSingleStep(step);
    s->setDecimals(decimals);
    s->setToolTip(tip);
    return s;
}

void setItemEnabled(QComboBox* combo, int index, bool enabled, const QString& tip = {}) {
    auto* model = qobject_cast<QStandardItemModel*>(combo->model());
    if (!model) return;
    QStandardItem* item = model->item(index);
    item->setEnabled(enabled);
    item->setToolTip(tip);
}

}  // namespace

ModelConfig SettingsPanel::defaultModelConfig() {
    ModelConfig c;
    c.embed_size = 32;
    c.hidden_size = 64;
    c.num_layers = 1;
    return c;
}

TrainConfig SettingsPanel::defaultTrainConfig() {
    TrainConfig c;
    c.epochs = 30;
    c.batch_size = 32;
    return c;
}

SettingsPanel::SettingsPanel(QWidget* parent) : QWidget(parent) {
    m_modelGroup = buildModelGroup();
    m_trainGroup = buildTrainGroup();
    m_error = new QLabel(this);
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color: #b00020;"));
    m_error->hide();
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_modelGroup);
    layout->addWidget(m_trainGroup);
    layout->addWidget(m_error);
    restoreDefaults();
}

QWidget* SettingsPanel::buildModelGroup() {
    auto* group = new QGroupBox(tr("Model"), this);
    m_cell = new QComboBox(group);
    m_cell->addItem(QStringLiteral("GRU"), int(CellType::gru));
    m_cell->addItem(QStringLiteral("LSTM"), int(CellType::lstm));
    m_layers = spin(group, 1, 8, tr("Recurrent layers in encoder and decoder (d2l: 2)"));
    m_embed = spin(group, 1, 4096, tr("Embedding width of both sides (d2l: 256)"));
    m_hidden = spin(group, 1, 4096, tr("Recurrent hidden width (d2l: 256)"));
    m_bidirectional = new QCheckBox(tr("Bidirectional encoder"), group);
    m_bidirectional->setObjectName(QStringLiteral("bidirectional"));
    m_reverseSource = new QCheckBox(tr("Read the source reversed (Sutskever)"), group);
    m_reverseSource->setObjectName(QStringLiteral("reverseSource"));
    m_reverseSource->setToolTip(tr("The encoder reads right to left; heatmap columns stay in reading order"));
    m_scoring = new QComboBox(group);
    const std::pair<Scoring, QString> scorings[] = {
        {Scoring::additive, tr("additive (Bahdanau)")}, {Scoring::dot, tr("dot (Luong)")},
        {Scoring::scaled_dot, tr("scaled dot")},        {Scoring::general, tr("general (Luong bilinear)")},
        {Scoring::none, tr("none (no attention baseline)")}};
    for (const auto& [s, label] : scorings) m_scoring->addItem(label, int(s));
    m_scoring->setToolTip(tr("How the decoder state scores each encoder state"));
    m_attentionSize = spin(group, 0, 4096, tr("Hidden width of additive attention; 0 = same as the hidden size"));
    m_attentionSize->setSpecialValueText(tr("= hidden"));
    m_dropout = dspin(group, 0.0, 0.9, 0.05, 2, tr("Dropout between layers and on attention weights (d2l: 0.2)"));
    m_init = new QComboBox(group);
    m_init->addItem(tr("Xavier (d2l)"), int(InitScheme::xavier));
    m_init->addItem(tr("uniform ±0.08 (Sutskever)"), int(InitScheme::uniform));
    m_init->addItem(tr("orthogonal (Bahdanau)"), int(InitScheme::orthogonal));

    auto* form = new QFormLayout(group);
    form->addRow(tr("Cell"), m_cell);
    form->addRow(tr("Layers"), m_layers);
    form->addRow(tr("Embedding"), m_embed);
    form->addRow(tr("Hidden"), m_hidden);
    form->addRow(m_bidirectional);
    form->addRow(m_reverseSource);
    form->addRow(tr("Scoring"), m_scoring);
    form->addRow(tr("Attention size"), m_attentionSize);
    form->addRow(tr("Dropout"), m_dropout);
    form->addRow(tr("Init"), m_init);

    for (QComboBox* c : {m_cell, m_scoring, m_init})
        connect(c, &QComboBox::currentIndexChanged, this, &SettingsPanel::onChanged);
    for (QSpinBox* s : {m_layers, m_embed, m_hidden, m_attentionSize})
        connect(s, &QSpinBox::valueChanged, this, &SettingsPanel::onChanged);
    connect(m_dropout, &QDoubleSpinBox::valueChanged, this, &SettingsPanel::onChanged);
    connect(m_bidirectional, &QCheckBox::toggled, this, &SettingsPanel::onChanged);
    connect(m_reverseSource, &QCheckBox::toggled, this, &SettingsPanel::onChanged);
    return group;
}

QWidget* SettingsPanel::buildTrainGroup() {
    auto* group = new QGroupBox(tr("Training"), this);
    m_optimizer = new QComboBox(group);
    m_optimizer->addItem(QStringLiteral("Adam"), int(OptimizerKind::adam));
    m_optimizer->addItem(QStringLiteral("SGD"), int(OptimizerKind::sgd));
    m_optimizer->addItem(QStringLiteral("Adadelta"), int(OptimizerKind::adadelta));
    m_lr = dspin(group, 0.00001, 100.0, 0.001, 5, tr("Learning rate (Adam: 0.005 as d2l; Adadelta: 1.0)"));
    m_momentum = dspin(group, 0.0, 0.99, 0.05, 2, tr("SGD momentum"));
    m_batch = spin(group, 1, 65536, tr("Sentences per batch (d2l: 128)"));
    m_epochs = spin(group, 1, 100000, tr("Passes over the training pairs"));
    m_teacherForcing = dspin(group, 0.0, 1.0, 0.05, 2, tr("Probability of feeding the true previous token"));
    m_clip = dspin(group, 0.0, 1000.0, 0.5, 2, tr("Clip the global gradient norm to this value"));
    m_clip->setSpecialValueText(tr("off"));
    m_device = new QComboBox(group);
    m_device->addItem(tr("auto"), QStringLiteral("auto"));
    m_device->addItem(QStringLiteral("CPU"), QStringLiteral("cpu"));
    m_device->addItem(QStringLiteral("CUDA"), QStringLiteral("cuda"));
    if (!cuda_available()) setItemEnabled(m_device, 2, false, tr("LibTorch sees no CUDA device"));
    m_seed = spin(group, 0, 2147483647, tr("Seeds weights, shuffling, dropout and teacher forcing"));
    m_maxLength = spin(group, 0, 1000, tr("Drop pairs with more tokens than this on either side"));
    m_maxLength->setSpecialValueText(tr("no limit"));
    m_valFraction = dspin(group, 0.0, 0.9, 0.05, 2, tr("Share of pairs held out for validation"));
    m_minFreq = spin(group, 1, 1000, tr("Tokens seen fewer times map to <unk>"));

    auto* form = new QFormLayout(group);
    form->addRow(tr("Optimiser"), m_optimizer);
    form->addRow(tr("Learning rate"), m_lr);
    form->addRow(tr("Momentum"), m_momentum);
    form->addRow(tr("Batch size"), m_batch);
    form->addRow(tr("Epochs"), m_epochs);
    form->addRow(tr("Teacher forcing"), m_teacherForcing);
    form->addRow(tr("Gradient clip"), m_clip);
    form->addRow(tr("Device"), m_device);
    form->addRow(tr("Seed"), m_seed);
    form->addRow(tr("Max length"), m_maxLength);
    form->addRow(tr("Validation share"), m_valFraction);
    form->addRow(tr("Min frequency"), m_minFreq);

    connect(m_optimizer, &QComboBox::currentIndexChanged, this, &SettingsPanel::onOptimizerChanged);
    connect(m_device, &QComboBox::currentIndexChanged, this, &SettingsPanel::onChanged);
    for (QSpinBox* s : {m_batch, m_epochs, m_seed, m_maxLength, m_minFreq})
        connect(s, &QSpinBox::valueChanged, this, &SettingsPanel::onChanged);
    for (QDoubleSpinBox* s : {m_lr, m_momentum, m_teacherForcing, m_clip, m_valFraction})
        connect(s, &QDoubleSpinBox::valueChanged, this, &SettingsPanel::onChanged);
    return group;
}

ModelConfig SettingsPanel::modelConfig() const {
    ModelConfig c = m_baseModel;
    c.cell = static_cast<CellType>(m_cell->currentData().toInt());
    c.num_layers = m_layers->value();
    c.embed_size = m_embed->value();
    c.hidden_size = m_hidden->value();
    c.bidirectional = m_bidirectional->isChecked();
    c.reverse_source = m_reverseSource->isChecked();
    c.scoring = static_cast<Scoring>(m_scoring->currentData().toInt());
    c.attention_size = m_attentionSize->value();
    c.dropout = m_dropout->value();
    c.init = static_cast<InitScheme>(m_init->currentData().toInt());
    c.seed = uint64_t(m_seed->value());
    return c;
}

TrainConfig SettingsPanel::trainConfig() const {
    TrainConfig c = m_baseTrain;
    c.optimizer = static_cast<OptimizerKind>(m_optimizer->currentData().toInt());
    c.lr = m_lr->value();
    c.momentum = m_momentum->value();
    c.batch_size = m_batch->value();
    c.epochs = m_epochs->value();
    c.teacher_forcing = m_teacherForcing->value();
    c.grad_clip = m_clip->value();
    c.device = ss(m_device->currentData().toString());
    c.seed = uint64_t(m_seed->value());
    c.max_length = m_maxLength->value();
    c.val_fraction = m_valFraction->value();
    c.min_freq = m_minFreq->value();
    return c;
}

void SettingsPanel::setModelConfig(const ModelConfig& c) {
    m_updating = true;
    m_baseModel = c;
    m_cell->setCurrentIndex(m_cell->findData(int(c.cell)));
    m_layers->setValue(int(c.num_layers));
    m_embed->setValue(int(c.embed_size));
    m_hidden->setValue(int(c.hidden_size));
    m_bidirectional->setChecked(c.bidirectional);
    m_reverseSource->setChecked(c.reverse_source);
    m_scoring->setCurrentIndex(m_scoring->findData(int(c.scoring)));
    m_attentionSize->setValue(int(c.attention_size));
    m_dropout->setValue(c.dropout);
    m_init->setCurrentIndex(m_init->findData(int(c.init)));
    m_updating = false;
    onChanged();
}

void SettingsPanel::setTrainConfig(const TrainConfig& c) {
    m_updating = true;
    m_baseTrain = c;
    m_optimizer->setCurrentIndex(m_optimizer->findData(int(c.optimizer)));
    m_lr->setValue(c.lr);
    m_momentum->setValue(c.momentum);
    m_batch->setValue(int(c.batch_size));
    m_epochs->setValue(c.epochs);
    m_teacherForcing->setValue(c.teacher_forcing);
    m_clip->setValue(c.grad_clip);
    const QString device = qs(c.device).startsWith(QLatin1String("cuda")) ? QStringLiteral("cuda") : qs(c.device);
    m_device->setCurrentIndex(std::max(0, m_device->findData(device)));
    m_seed->setValue(int(std::min<uint64_t>(c.seed, 2147483647)));
    m_maxLength->setValue(int(c.max_length));
    m_valFraction->setValue(c.val_fraction);
    m_minFreq->setValue(c.min_freq);
    m_updating = false;
    onChanged();
}

void SettingsPanel::restoreDefaults() {
    setModelConfig(defaultModelConfig());
    setTrainConfig(defaultTrainConfig());
}

void SettingsPanel::onOptimizerChanged() {
    if (m_updating) return;
    // Swap the learning rate to the new optimiser's usual value when the old one's was untouched.
    const auto kind = static_cast<OptimizerKind>(m_optimizer->currentData().toInt());
    const double adamDefault = 0.005, sgdDefault = 0.1, adadeltaDefault = 1.0;
    const double lr = m_lr->value();
    if (std::abs(lr - adamDefault) < 1e-12 || std::abs(lr - sgdDefault) < 1e-12 || std::abs(lr - adadeltaDefault) < 1e-12)
        m_lr->setValue(kind == OptimizerKind::adam ? adamDefault : kind == OptimizerKind::sgd ? sgdDefault : adadeltaDefault);
    onChanged();
}

void SettingsPanel::onChanged() {
    if (m_updating) return;
    const auto scoring = static_cast<Scoring>(m_scoring->currentData().toInt());
    const bool dotLike = scoring == Scoring::dot || scoring == Scoring::scaled_dot;
    // The core rejects dot-product scoring with a bidirectional encoder (keys twice as wide as queries).
    const bool reversed = m_reverseSource->isChecked();
    m_bidirectional->setEnabled((!dotLike && !reversed) || m_bidirectional->isChecked());
    m_bidirectional->setToolTip(dotLike    ? tr("Dot-product scoring needs keys as wide as the decoder state")
                                : reversed ? tr("A reversed source reading needs a unidirectional encoder")
                                           : QString());
    for (int i = 0; i < m_scoring->count(); ++i) {
        const auto s = static_cast<Scoring>(m_scoring->itemData(i).toInt());
        const bool clash = m_bidirectional->isChecked() && (s == Scoring::dot || s == Scoring::scaled_dot);
        setItemEnabled(m_scoring, i, !clash || i == m_scoring->currentIndex(),
                       clash ? tr("Needs a unidirectional encoder") : QString());
    }
    // A bidirectional encoder already reads both ways: reversing is for a unidirectional one.
    m_reverseSource->setEnabled(!m_bidirectional->isChecked() || m_reverseSource->isChecked());
    m_attentionSize->setEnabled(scoring == Scoring::additive);
    m_momentum->setEnabled(static_cast<OptimizerKind>(m_optimizer->currentData().toInt()) == OptimizerKind::sgd);
    const QString error = validationError();
    m_error->setText(error);
    m_error->setVisible(!error.isEmpty());
    Q_EMIT settingsChanged();
}

QString SettingsPanel::validationError() const {
    try {
        ModelConfig m = modelConfig();
        m.src_vocab = std::max<int64_t>(m.src_vocab, 5);  // the real sizes come from the data
        m.tgt_vocab = std::max<int64_t>(m.tgt_vocab, 5);
        m.validate();
        trainConfig().validate();
    } catch (const std::exception& e) {
        return qs(e.what());
    }
    return {};
}

void SettingsPanel::saveSettings(QSettings& settings) const {
    settings.setValue(QStringLiteral("settings/model"), qs(modelConfig().to_json().dump()));
    settings.setValue(QStringLiteral("settings/train"), qs(trainConfig().to_json().dump()));
}

void SettingsPanel::loadSettings(const QSettings& settings) {
    try {
        const QString model = settings.value(QStringLiteral("settings/model")).toString();
        const QString train = settings.value(QStringLiteral("settings/train")).toString();
        if (!model.isEmpty()) setModelConfig(ModelConfig::from_json(nlohmann::json::parse(ss(model))));
        if (!train.isEmpty()) {
            TrainConfig t = TrainConfig::from_json(nlohmann::json::parse(ss(train)));
            t.max_batches = 0;  // test-only limits never carry over
            setTrainConfig(t);
        }
    } catch (const std::exception&) {
        restoreDefaults();  // settings from an older version: start clean
    }
}

}  // namespace attnviz::ui
