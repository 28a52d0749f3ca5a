// attnviz: the desktop app. Built with the developer tooling (-DATTNVIZ_APP_TOOLS=ON,
// ui/tools): --screenshot DIR runs a short scripted session offscreen and writes
// PNGs of the main views (for the README); the hidden --soak SECONDS --soak-log
// FILE CORPUS trains that long while logging the GUI thread's timer lateness
// (tools/soak.sh).
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QSettings>
#include <QTimer>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <ATen/Parallel.h>

#include "core/model/cuda_runtime.hpp"
#include "core/model/work_cost.hpp"
#include "ui/window/MainWindow.hpp"
#include "ui/training/TrainingController.hpp"
#ifdef ATTNVIZ_APP_TOOLS
#include "ui/tools/Screenshots.hpp"
#include "ui/tools/Soak.hpp"
#endif

int main(int argc, char* argv[]) {
    attnviz::load_cuda_runtime();  // before LibTorch is asked about CUDA (core/model/cuda_runtime.hpp)
    // Screenshots need no display: choose the offscreen platform before Qt starts.
    for (int i = 1; i < argc; ++i)
        if ((qstrcmp(argv[i], "--screenshot") == 0 || qstrcmp(argv[i], "--soak") == 0) &&
            qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
            qputenv("QT_QPA_PLATFORM", "offscreen");

    // Leave one core to the GUI thread: intra-op threads that outnumber the free
    // cores spin against it, and for models of this size one thread fewer is no
    // slower (on 2 cores one thread trained d2l's configuration faster than two).
    if (!std::getenv("OMP_NUM_THREADS")) {
        const unsigned cores = std::thread::hardware_concurrency();
        at::set_num_threads(static_cast<int>(cores > 1 ? cores - 1 : 1));
    }
    attnviz::set_work_threads(at::get_num_threads());  // the default work bound is a time (work_cost.hpp)
#ifdef ATTNVIZ_APP_TOOLS
    attnviz::ui::TimedApplication app(argc, argv);  // a QApplication that a soak run can time
#else
    QApplication app(argc, argv);
#endif
    QApplication::setOrganizationName(QStringLiteral("attnviz"));
    QApplication::setApplicationName(QStringLiteral("attnviz"));
    QApplication::setApplicationVersion(QStringLiteral(ATTNVIZ_VERSION));
    QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/attnviz.svg")));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Train seq2seq models with attention and inspect where they look."));
    parser.addHelpOption();
    parser.addVersionOption();
#ifdef ATTNVIZ_APP_TOOLS
    QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                  QStringLiteral("Train briefly on the default task and write PNGs of the main views to DIR."),
                                  QStringLiteral("DIR"));
    QCommandLineOption seconds(QStringLiteral("screenshot-seconds"),
                               QStringLiteral("Longest training time of each screenshot run (default 120)."), QStringLiteral("S"),
                               QStringLiteral("120"));
    QCommandLineOption soak(QStringLiteral("soak"), QStringLiteral("Soak test: train on the corpus for S seconds."),
                            QStringLiteral("S"));
    QCommandLineOption soakLog(QStringLiteral("soak-log"), QStringLiteral("Soak test: JSON lines of timer lateness."),
                               QStringLiteral("FILE"));
    soak.setFlags(QCommandLineOption::HiddenFromHelp);
    soakLog.setFlags(QCommandLineOption::HiddenFromHelp);
    parser.addOption(screenshot);
    parser.addOption(seconds);
    parser.addOption(soak);
    parser.addOption(soakLog);
#endif
    parser.addPositionalArgument(QStringLiteral("file"), QStringLiteral("A checkpoint or a TSV corpus to open."), QStringLiteral("[file]"));
    parser.process(app);

#ifdef ATTNVIZ_APP_TOOLS
    if (parser.isSet(soak)) {
        if (parser.positionalArguments().size() != 1 || !parser.isSet(soakLog)) {
            std::fprintf(stderr, "attnviz: --soak SECONDS needs --soak-log FILE and one corpus file\n");
            return 2;
        }
        QSettings::setDefaultFormat(QSettings::IniFormat);  // a clean slate, as for screenshots
        QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, QDir::tempPath() + QStringLiteral("/attnviz-soak"));
        QSettings().clear();
        attnviz::ui::MainWindow window;
        attnviz::ui::SoakOptions options;
        options.corpus = parser.positionalArguments().front();
        options.log = parser.value(soakLog);
        options.seconds = parser.value(soak).toInt();
        const int rc = attnviz::ui::runSoak(window, options);
        window.close();
        std::fflush(nullptr);
        std::_Exit(rc);  // no static destructors racing a worker that did not stop in time
    }

    if (parser.isSet(screenshot)) {
        // A clean slate: no remembered settings, window layout or recent files.
        QSettings::setDefaultFormat(QSettings::IniFormat);
        QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, QDir::tempPath() + QStringLiteral("/attnviz-screenshot"));
        QSettings().clear();
        attnviz::ui::MainWindow window;
        attnviz::ui::ScreenshotOptions options;
        options.directory = parser.value(screenshot);
        options.trainSeconds = parser.value(seconds).toInt();
        QString error;
        const QStringList files = attnviz::ui::takeScreenshots(window, options, &error);
        for (const QString& f : files) std::printf("%s\n", qPrintable(f));
        if (files.isEmpty()) std::fprintf(stderr, "attnviz: screenshots failed: %s\n", qPrintable(error));
        window.close();
        return files.isEmpty() ? 1 : 0;
    }

#endif

    attnviz::ui::MainWindow window;
    window.show();
    const QStringList files = parser.positionalArguments();
    if (!files.isEmpty()) {
        const QString path = files.front();
        QTimer::singleShot(0, &window, [&window, path] { window.openFile(path); });
    }
    const int rc = app.exec();
    // A worker that did not stop within the close timeout must not be joined by static destructors.
    if (attnviz::ui::TrainingController::detachedWorkers() > 0) {
        std::fflush(nullptr);
        std::_Exit(rc);
    }
    return rc;
}
