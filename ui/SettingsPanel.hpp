#pragma once
// Model and training settings as form widgets whose ranges make invalid values
// impossible to type; combinations the core rejects are explained inline.
#include <QWidget>

#include "core/train.hpp"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSettings;
class QSpinBox;
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

    void saveSettings(QSettings& settings) const;
    void loadSettings(const QSettings& settings);
    /// GUI defaults: small enough to learn a built-in task in a minute on a laptop CPU.
    static ModelConfig defaultModelConfig();
    static TrainConfig defaultTrainConfig();

    QWidget* modelGroup() const { return m_modelGroup; }
    QWidget* trainGroup() const { return m_trainGroup; }

public Q_SLOTS:
    void restoreDefaults();

Q_SIGNALS:
    void settingsChanged();

private:
    void onChanged();
    void onOptimizerChanged();
    QWidget* buildModelGroup();
    QWidget* buildTrainGroup();

    ModelConfig m_baseModel;
    TrainConfig m_baseTrain;
    bool m_updating = false;

    QWidget* m_modelGroup;
    QWidget* m_trainGroup;
    QComboBox* m_cell;
    QSpinBox* m_layers;
    QSpinBox* m_embed;
    QSpinBox* m_hidden;
    QCheckBox* m_bidirectional;
    QCheckBox* m_reverseSource;
    QComboBox* m_scoring;
    QSpinBox* m_attentionSize;
    QDoubleSpinBox* m_dropout;
    QComboBox* m_init;

    QComboBox* m_optimizer;
    QDoubleSpinBox* m_lr;
    QDoubleSpinBox* m_momentum;
    QSpinBox* m_batch;
    QSpinBox* m_epochs;
    QDoubleSpinBox* m_teacherForcing;
    QDoubleSpinBox* m_clip;
    QComboBox* m_device;
    QSpinBox* m_seed;
    QSpinBox* m_maxLength;
    QDoubleSpinBox* m_valFraction;
    QSpinBox* m_minFreq;
    QLabel* m_error;
};

}  // namespace attnviz::ui
