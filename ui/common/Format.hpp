#pragma once
// Small conversions between core types and Qt strings, and how text that
// changes all the time is shown.
#include <QString>
#include <QStringList>
#include <string>
#include <vector>

QT_BEGIN_NAMESPACE
class QLabel;
QT_END_NAMESPACE

namespace attnviz::ui {

inline QString qs(const std::string& s) { return QString::fromStdString(s); }
inline std::string ss(const QString& s) { return s.toStdString(); }
QStringList toQStringList(const std::vector<std::string>& v);

/// A token as shown on screen: a character-level space becomes a visible "␣".
QString displayToken(const QString& token);

/// "0:42", "12:03", "1:02:03"; "–" for negative or non-finite seconds.
QString formatDuration(double seconds);
/// "12.3k tok/s" style.
QString formatRate(double perSecond);
/// Loss with 4 significant digits; "–" for NaN.
QString formatLoss(double value);
/// The file-dialog filter for checkpoints.
QString checkpointFileFilter();

/// Gives a label whose text changes many times a second (a rate, a clock, a batch
/// counter) a fixed size that fits `widest`, its widest expected text. Qt re-lays out
/// the parents of any widget whose size may change when its text does: for the status
/// bar that is the whole main window, repainted a few times a second during training.
void fixLabelSize(QLabel* label, const QString& widest);

}  // namespace attnviz::ui
