#pragma once
// Model and training settings as form widgets generated from the parameter
// registry (core/config/registry.hpp): each editor has the registry's range, so
// out-of-range values cannot be typed; combinations the core rejects are
// explained inline (the registry's validate).
#include <QWidget>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config/registry.hpp"

QT_BEGIN_NAMESPACE
class QFormLayout;
class QLabel;
class QSettings;
QT_END_NAMESPACE

namespace attnviz::ui {

class SettingsPanel : public QWidget {
    Q_OBJECT
public:
    explicit SettingsPanel(QWidget* parent = nullptr);

    /// The settings on screen, over the fields the form does not show (kept from setModelConfig()).
    ModelConfig modelConfig() const;
    TrainConfig trainConfig() const;
    void setModelConfig(const ModelConfig& config);
    void setTrainConfig(const TrainConfig& config);
    /// Empty when the settings are valid, else the core's message.
    QString validationError() const;
    bool isValid() const { return validationError().isEmpty(); }

    /// One key per form field, "settings/<registry name>" (settings of older
    /// versions, two JSON objects under settings/model and settings/train, are still read).
    void saveSettings(QSettings& settings) const;
    void loadSettings(const QSettings& settings);
    /// GUI defaults: small enough to learn a built-in task in a minute on a laptop CPU,
    /// with early stopping on so a converged run ends by itself.
    static ModelConfig defaultModelConfig();
    static TrainConfig defaultTrainConfig();

    QWidget* modelGroup() const { return m_modelGroup; }
    QWidget* trainGroup() const { return m_trainGroup; }
    QWidget* dataGroup() const { return m_dataGroup; }

public Q_SLOTS:
    void restoreDefaults();

Q_SIGNALS:
    void settingsChanged();

private:
    /// One form editor (QSpinBox, QDoubleSpinBox, QComboBox or QCheckBox) and its parameter.
    struct Field {
        const ParamSpec* spec;
        QWidget* editor;
    };

    void onChanged();
    void onOptimizerChanged();
    /// Greys out the fields of the model family not chosen (the registry's ParamFamily), saying why.
    void greyOtherFamily();
    QWidget* buildGroup(const QString& title, ParamGroup group);
    QWidget* makeEditor(const ParamSpec& p, QWidget* parent);
    nlohmann::json read(const Field& f) const;
    void write(const Field& f, const nlohmann::json& value);
    /// The editor of the registry parameter called name (nullptr if not in the form).
    QWidget* editor(const std::string& name) const;
    std::string choice(const std::string& name) const;  ///< a combo box's current choice name
    Hyperparameters current() const;  ///< the base configs with the form's values over them
    void showConfig(const Hyperparameters& h, bool model);

    Hyperparameters m_base;
    bool m_updating = false;
    std::vector<Field> m_fields;

    QWidget* m_modelGroup;
    QWidget* m_trainGroup;
    QWidget* m_dataGroup;
    QLabel* m_error;
};

}  // namespace attnviz::ui
