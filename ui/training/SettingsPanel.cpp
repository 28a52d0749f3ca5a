#include "ui/training/SettingsPanel.hpp"

#include <QAction>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QSettings>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStyle>
#include <QVBoxLayout>
#include <algorithm>
#include <climits>
#include <cmath>

#include "core/model/device.hpp"
#include "core/io/json_bounded.hpp"
#include "ui/common/Format.hpp"

namespace attnviz::ui {
namespace {

using json = nlohmann::json;

/// The parameters shown under "Early stopping & schedule" in the Training box.
bool isScheduleParameter(const std::string& name) {
    for (const char* n : {"patience", "min_delta", "keep_best", "lr_schedule", "lr_factor", "lr_step", "lr_patience"})
        if (name == n) return true;
    return false;
}

void setItemEnabled(QComboBox* combo, int index, bool enabled, const QString& tip = {}) {
    auto* model = qobject_cast<QStandardItemModel*>(combo->model());
    if (!model) return;
    QStandardItem* item = model->item(index);
    item->setEnabled(enabled);
    item->setToolTip(tip);
}

/// The registry's help as a tooltip: "Embedding width of both sides.\nRange 1..4096 · d2l: 256".
QString tooltip(const ParamSpec& p) {
    QString tip = qs(p.help);
    if (!tip.isEmpty()) tip[0] = tip[0].toUpper();
    QStringList extra;
    if (p.type == ParamType::integer || p.type == ParamType::real) extra << QStringLiteral("Range %1").arg(qs(describe_range(p)));
    if (!p.d2l_value.is_null()) extra << QStringLiteral("d2l: %1").arg(qs(format_value(p, p.d2l_value)));
    if (!extra.isEmpty()) tip += QStringLiteral(".\n") + extra.join(QStringLiteral(" · "));
    return tip;
}

double clampTo(const ParamSpec& p, double x) {
    if (!std::isfinite(x)) x = p.default_value.get<double>();
    return std::clamp(x, *p.min, *p.max);
}

/// Decimals a real parameter's spin box shows: enough for its default, d2l's value and the
/// form's own default (SettingsPanel::defaultTrainConfig), at least 2.
int decimalsFor(const ParamSpec& p, const json& formDefault) {
    if (p.min_exclusive) return 5;  // e.g. learning rates down to 1e-5
    int decimals = 2;
    for (const json& v : {p.default_value, p.d2l_value, formDefault})
        if (v.is_number())
            while (decimals < 6 && std::abs(v.get<double>() * std::pow(10, decimals) -
                                            std::round(v.get<double>() * std::pow(10, decimals))) > 1e-9)
                ++decimals;
    return decimals;
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
    c.patience = 3;       // the toy tasks stop once the validation loss no longer falls...
    c.min_delta = 0.001;  // ...by more than a crumb (toy-french falls by less than this from about epoch 11,
                          // with every sentence right since epoch 6: without it, it trained all 30 epochs)...
    c.keep_best = true;   // ...and keep the model of their best epoch
    return c;
}

SettingsPanel::SettingsPanel(QWidget* parent) : QWidget(parent) {
    m_modelGroup = buildGroup(tr("Model"), ParamGroup::model);
    m_trainGroup = buildGroup(tr("Training"), ParamGroup::training);
    m_dataGroup = buildGroup(tr("Data"), ParamGroup::data);
    m_error = new QLabel(this);
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("color: #b00020;"));
    m_error->hide();
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_modelGroup);
    layout->addWidget(m_trainGroup);
    layout->addWidget(m_dataGroup);
    layout->addWidget(m_error);
    restoreDefaults();
}

QWidget* SettingsPanel::buildGroup(const QString& title, ParamGroup group) {
    auto* box = new QGroupBox(title, this);
    auto* form = new QFormLayout(box);
    // Narrow docks put a field under its label rather than cutting it (the minimum is the wider of
    // the two, not their sum).
    form->setRowWrapPolicy(QFormLayout::WrapLongRows);
    bool scheduleHeading = false;
    for (const auto& p : parameters()) {
        if (p.group != group || !p.in_form) continue;
        if (isScheduleParameter(p.name) && !scheduleHeading) {
            auto* heading = new QLabel(tr("<b>Early stopping &amp; schedule</b>"), box);
            form->addRow(heading);
            scheduleHeading = true;
        }
        QWidget* e = makeEditor(p, box);
        if (p.type == ParamType::boolean)
            form->addRow(e);
        else
            form->addRow(qs(p.label), e);
        m_fields.push_back({&p, e});
    }
    return box;
}

QWidget* SettingsPanel::makeEditor(const ParamSpec& p, QWidget* parent) {
    QWidget* editor = nullptr;
    const bool integer = p.type == ParamType::integer;
    if (integer && *p.max <= INT_MAX && *p.min >= INT_MIN) {
        auto* s = new QSpinBox(parent);
        s->setRange(int(*p.min), int(*p.max));
        s->setAccelerated(true);
        if (*p.min == 0 && !p.zero_means.empty()) s->setSpecialValueText(qs(p.zero_means));
        connect(s, &QSpinBox::valueChanged, this, &SettingsPanel::onChanged);
        editor = s;
    } else if (integer || p.type == ParamType::real) {
        // Reals, and integers beyond int (the seed): a double holds every integer up to 2^53 exactly.
        auto* s = new QDoubleSpinBox(parent);
        const Hyperparameters formDefaults{defaultModelConfig(), defaultTrainConfig()};
        const int decimals = integer ? 0 : decimalsFor(p, p.get(formDefaults));
        s->setDecimals(decimals);
        const double step = std::pow(10.0, -decimals);
        s->setRange(p.min_exclusive ? *p.min + step : *p.min, *p.max);
        // Small values (min_delta's 0.001) step by their last decimal.
        s->setSingleStep(integer                      ? 1.0
                         : p.min_exclusive            ? 0.001
                         : decimals >= 3              ? step
                         : *p.max <= 1.0              ? 0.05
                                                      : 0.5);
        if (*p.min == 0 && !p.zero_means.empty()) s->setSpecialValueText(qs(p.zero_means));
        connect(s, &QDoubleSpinBox::valueChanged, this, &SettingsPanel::onChanged);
        editor = s;
    } else if (p.type == ParamType::text && p.folder) {
        // A folder (the TensorBoard log's): typed, or chosen with the button at its end; empty = off.
        auto* e = new QLineEdit(parent);
        e->setPlaceholderText(tr("off"));
        e->setClearButtonEnabled(true);
        QAction* choose = e->addAction(style()->standardIcon(QStyle::SP_DirOpenIcon), QLineEdit::TrailingPosition);
        choose->setObjectName(qs(p.name) + QStringLiteral("Choose"));
        choose->setToolTip(tr("Choose a folder…"));
        connect(choose, &QAction::triggered, this, [this, e, label = qs(p.label)] {
            const QString dir = QFileDialog::getExistingDirectory(this, label, e->text());
            if (!dir.isEmpty()) e->setText(dir);
        });
        connect(e, &QLineEdit::textChanged, this, &SettingsPanel::onChanged);
        editor = e;
    } else if (p.type == ParamType::boolean) {
        auto* c = new QCheckBox(qs(p.label), parent);
        connect(c, &QCheckBox::toggled, this, &SettingsPanel::onChanged);
        editor = c;
    } else {
        auto* c = new QComboBox(parent);
        // A few characters at least, not the longest entry: the Setup dock fits a quarter of a laptop's window.
        c->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
        c->setMinimumContentsLength(8);
        if (p.type == ParamType::choice) {
            for (size_t i = 0; i < p.choices.size(); ++i)
                c->addItem(qs(i < p.choice_labels.size() ? p.choice_labels[i] : p.choices[i]), qs(p.choices[i]));
        } else {  // the device: a choice of the usual ones; setTrainConfig adds others such as cuda:1
            c->addItem(tr("auto"), QStringLiteral("auto"));
            c->addItem(QStringLiteral("CPU"), QStringLiteral("cpu"));
            c->addItem(QStringLiteral("CUDA"), QStringLiteral("cuda"));
            if (!cuda_available()) setItemEnabled(c, 2, false, tr("LibTorch sees no CUDA device"));
        }
        if (p.name == "optimizer")
            connect(c, &QComboBox::currentIndexChanged, this, &SettingsPanel::onOptimizerChanged);
        else
            connect(c, &QComboBox::currentIndexChanged, this, &SettingsPanel::onChanged);
        editor = c;
    }
    editor->setObjectName(qs(p.name));
    editor->setToolTip(tooltip(p));
    return editor;
}

json SettingsPanel::read(const Field& f) const {
    if (auto* s = qobject_cast<QSpinBox*>(f.editor)) return json(int64_t(s->value()));
    if (auto* s = qobject_cast<QDoubleSpinBox*>(f.editor))
        return f.spec->type == ParamType::integer ? json(int64_t(std::llround(s->value()))) : json(s->value());
    if (auto* c = qobject_cast<QCheckBox*>(f.editor)) return json(c->isChecked());
    if (auto* e = qobject_cast<QLineEdit*>(f.editor)) return json(ss(e->text().trimmed()));
    return json(ss(static_cast<QComboBox*>(f.editor)->currentData().toString()));
}

void SettingsPanel::write(const Field& f, const json& v) {
    if (auto* s = qobject_cast<QSpinBox*>(f.editor)) {
        s->setValue(int(clampTo(*f.spec, v.get<double>())));  // out of range: the nearest allowed value
    } else if (auto* s = qobject_cast<QDoubleSpinBox*>(f.editor)) {
        s->setValue(clampTo(*f.spec, v.get<double>()));
    } else if (auto* c = qobject_cast<QCheckBox*>(f.editor)) {
        c->setChecked(v.get<bool>());
    } else if (auto* e = qobject_cast<QLineEdit*>(f.editor)) {
        e->setText(qs(v.get<std::string>()));
    } else {
        auto* combo = static_cast<QComboBox*>(f.editor);
        const QString name = qs(v.get<std::string>());
        int index = combo->findData(name);
        if (index < 0 && f.spec->type == ParamType::text && f.spec->check_text &&
            f.spec->check_text(ss(name)).empty()) {
            combo->addItem(name.toUpper(), name);  // e.g. cuda:1
            index = combo->count() - 1;
            if (!cuda_available()) setItemEnabled(combo, index, false, tr("LibTorch sees no CUDA device"));
        }
        combo->setCurrentIndex(std::max(0, index));
    }
}

QWidget* SettingsPanel::editor(const std::string& name) const {
    for (const auto& f : m_fields)
        if (f.spec->name == name) return f.editor;
    return nullptr;
}

std::string SettingsPanel::choice(const std::string& name) const {
    auto* combo = qobject_cast<QComboBox*>(editor(name));
    return combo ? ss(combo->currentData().toString()) : std::string();
}

Hyperparameters SettingsPanel::current() const {
    Hyperparameters h = m_base;
    for (const auto& f : m_fields) f.spec->put(h, read(f));  // the seed sets both configs' seeds
    // The other family's parameters keep their defaults (the registry's rule): the greyed
    // fields keep what was typed, for when the user switches back.
    for (const auto& p : parameters())
        if (!applies_to(p, h.model.arch)) p.put(h, p.default_value);
    return h;
}

ModelConfig SettingsPanel::modelConfig() const { return current().model; }

TrainConfig SettingsPanel::trainConfig() const { return current().train; }

void SettingsPanel::showConfig(const Hyperparameters& h, bool model) {
    m_updating = true;
    for (const auto& f : m_fields)
        if ((f.spec->group == ParamGroup::model) == model) write(f, f.spec->get(h));
    m_updating = false;
    onChanged();
}

void SettingsPanel::setModelConfig(const ModelConfig& c) {
    m_base.model = c;
    showConfig(m_base, true);
}

void SettingsPanel::setTrainConfig(const TrainConfig& c) {
    m_base.train = c;
    showConfig(m_base, false);
}

void SettingsPanel::restoreDefaults() {
    setModelConfig(defaultModelConfig());
    setTrainConfig(defaultTrainConfig());
}

void SettingsPanel::onOptimizerChanged() {
    if (m_updating) return;
    // Swap the learning rate to the new optimiser's usual value when the old one's was untouched.
    auto* lr = static_cast<QDoubleSpinBox*>(editor("lr"));
    const OptimizerKind kind = optimizer_from_string(choice("optimizer"));
    const double adamDefault = 0.005, sgdDefault = 0.1, adadeltaDefault = 1.0;
    const double value = lr->value();
    if (std::abs(value - adamDefault) < 1e-12 || std::abs(value - sgdDefault) < 1e-12 ||
        std::abs(value - adadeltaDefault) < 1e-12)
        lr->setValue(kind == OptimizerKind::adam ? adamDefault : kind == OptimizerKind::sgd ? sgdDefault : adadeltaDefault);
    onChanged();
}

void SettingsPanel::onChanged() {
    if (m_updating) return;
    auto* bidirectional = static_cast<QCheckBox*>(editor("bidirectional"));
    auto* reverseSource = static_cast<QCheckBox*>(editor("reverse_source"));
    auto* scoringBox = static_cast<QComboBox*>(editor("scoring"));
    const auto dotLike = [](const std::string& s) {
        return s == to_string(Scoring::dot) || s == to_string(Scoring::scaled_dot);
    };
    const std::string scoring = choice("scoring");
    // The core rejects dot-product scoring with a bidirectional encoder (keys twice as wide as queries).
    const bool reversed = reverseSource->isChecked();
    bidirectional->setEnabled((!dotLike(scoring) && !reversed) || bidirectional->isChecked());
    bidirectional->setToolTip(dotLike(scoring) ? tr("Dot-product scoring needs keys as wide as the decoder state")
                              : reversed       ? tr("A reversed source reading needs a unidirectional encoder")
                                               : tooltip(find_parameter("bidirectional")));
    for (int i = 0; i < scoringBox->count(); ++i) {
        const bool clash = bidirectional->isChecked() && dotLike(ss(scoringBox->itemData(i).toString()));
        setItemEnabled(scoringBox, i, !clash || i == scoringBox->currentIndex(),
                       clash ? tr("Needs a unidirectional encoder") : QString());
    }
    // A bidirectional encoder already reads both ways: reversing is for a unidirectional one.
    reverseSource->setEnabled(!bidirectional->isChecked() || reversed);
    editor("attention_size")->setEnabled(scoring == to_string(Scoring::additive));
    editor("momentum")->setEnabled(choice("optimizer") == to_string(OptimizerKind::sgd));
    const std::string schedule = choice("lr_schedule");
    editor("lr_factor")->setEnabled(schedule != to_string(LrSchedule::none));
    editor("lr_step")->setEnabled(schedule == to_string(LrSchedule::step));
    editor("lr_patience")->setEnabled(schedule == to_string(LrSchedule::plateau));
    editor("warmup_steps")->setEnabled(schedule == to_string(LrSchedule::warmup));
    greyOtherFamily();
    const QString error = validationError();
    m_error->setText(error);
    m_error->setVisible(!error.isEmpty());
    Q_EMIT settingsChanged();
}

void SettingsPanel::greyOtherFamily() {
    const ModelArch arch = arch_from_string(choice("arch"));
    const QString folderTip = tr("A pretrained model's shape comes from its folder (File → Open model folder…); Train "
                                 "fine-tunes it as it is");
    for (const auto& f : m_fields) {
        // A pretrained model's shape is its folder's: Train fine-tunes it, the fields only show it.
        const bool fromFolder = arch == ModelArch::pretrained && f.spec->group == ParamGroup::model && f.spec->name != "arch";
        if (f.spec->family == ParamFamily::all) {
            if (f.spec->group != ParamGroup::model || f.spec->name == "arch") continue;
            f.editor->setEnabled(!fromFolder);
            f.editor->setToolTip(fromFolder ? folderTip : tooltip(*f.spec));
            if (auto* form = qobject_cast<QFormLayout*>(f.editor->parentWidget()->layout()))
                if (QWidget* label = form->labelForField(f.editor)) label->setEnabled(f.editor->isEnabled());
            continue;
        }
        const bool applies = applies_to(*f.spec, arch);
        if (!applies) {
            f.editor->setEnabled(false);
            f.editor->setToolTip(f.spec->family == ParamFamily::rnn
                                     ? tr("For the RNN only: a Transformer does not use it (the value is kept "
                                          "for when you switch back to the RNN)")
                                     : tr("For the Transformer only: the RNN does not use it (the value is kept "
                                          "for when you switch back to the Transformer)"));
        } else {
            // Fields with rules of their own (onChanged) keep the state those gave them.
            const std::string& n = f.spec->name;
            if (n != "bidirectional" && n != "reverse_source" && n != "attention_size") f.editor->setEnabled(true);
            if (n != "bidirectional") f.editor->setToolTip(tooltip(*f.spec));  // its tooltip says why it is off
        }
        if (fromFolder) {
            f.editor->setEnabled(false);
            f.editor->setToolTip(folderTip);
        }
        if (auto* form = qobject_cast<QFormLayout*>(f.editor->parentWidget()->layout()))
            if (QWidget* label = form->labelForField(f.editor)) label->setEnabled(f.editor->isEnabled());
    }
}

QString SettingsPanel::validationError() const {
    try {
        validate(current());  // the registry's ranges and rules; vocabulary sizes come with the data
    } catch (const std::exception& e) {
        return qs(e.what());
    }
    return {};
}

void SettingsPanel::saveSettings(QSettings& settings) const {
    const Hyperparameters h = current();
    for (const auto& f : m_fields)
        // A greyed field of the other family: what is on screen (current() holds its default).
        settings.setValue(QStringLiteral("settings/") + qs(f.spec->name),
                          qs(format_value(*f.spec, applies_to(*f.spec, h.model.arch) ? f.spec->get(h) : read(f))));
    settings.remove(QStringLiteral("settings/model"));  // the JSON of older versions, now one key per field
    settings.remove(QStringLiteral("settings/train"));
}

void SettingsPanel::loadSettings(const QSettings& settings) {
    Hyperparameters h = current();
    // Older versions: a JSON object per config. Only the form's fields are read (test-only
    // limits such as max_batches never carry over); a bad value keeps what is on screen.
    const std::pair<const char*, bool> legacy[] = {{"settings/model", true}, {"settings/train", false}};
    for (const auto& [key, model] : legacy) {
        json j;
        try {
            j = parse_json_bounded(ss(settings.value(QLatin1String(key)).toString()), "settings");
        } catch (const std::exception&) {
            continue;  // not JSON (or absent): nothing to carry over
        }
        if (!j.is_object()) continue;
        for (const auto& f : m_fields) {
            auto it = j.find(f.spec->name);
            if ((f.spec->group == ParamGroup::model) != model || it == j.end()) continue;
            try {
                check_value(*f.spec, *it);
                f.spec->put(h, *it);
            } catch (const std::exception&) {
            }
        }
    }
    for (const auto& f : m_fields) {
        const QVariant v = settings.value(QStringLiteral("settings/") + qs(f.spec->name));
        if (!v.isValid()) continue;
        try {
            f.spec->put(h, parse_value(*f.spec, ss(v.toString())));
        } catch (const std::exception&) {
            // a hand-edited or outdated value: keep what is on screen
        }
    }
    // A pretrained model comes from its folder, which the settings do not hold: start from the default family.
    if (h.model.is_pretrained() && !h.model.pretrained) h.model.arch = defaultModelConfig().arch;
    setModelConfig(h.model);
    setTrainConfig(h.train);
}

}  // namespace attnviz::ui
