"""``format("replay")``: a recorded table streamed in its own time order, at its own pace × ``speed`` or at a fixed
rate (`impulse.replay.source`); the recording and the pacing are `impulse.replay.recording`, the options
`impulse.replay.options`."""
