package sharedstore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/smithy-go/logging"
)

// sdkLogger is the AWS SDK's logging.Logger writing to a slog.Logger, so
// that the SDK's own lines (its default writes "SDK <date> WARN ..." to
// stderr, in the middle of a CLI's output) are records like every other:
// leveled, formatted, with the component named. The SDK's two
// classifications map to slog's Warn and Debug; anything else is Debug.
type sdkLogger struct {
	log *slog.Logger
	ctx context.Context
}

func newSDKLogger(log *slog.Logger) sdkLogger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return sdkLogger{log: log.With("component", "aws-sdk"), ctx: context.Background()}
}

// Logf implements logging.Logger.
func (l sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelDebug
	if c == logging.Warn {
		level = slog.LevelWarn
	}
	if !l.log.Enabled(l.ctx, level) {
		return // formatting is not free, and SDK debug lines are many
	}
	l.log.Log(l.ctx, level, fmt.Sprintf(format, v...))
}

// WithContext implements logging.ContextLogger: the SDK hands each
// operation's context, which slog handlers may read (request ids).
func (l sdkLogger) WithContext(ctx context.Context) logging.Logger {
	return sdkLogger{log: l.log, ctx: ctx}
}
