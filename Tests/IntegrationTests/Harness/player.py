"""The tests' sound player: one playback stream (silence) on the server of
$PULSE_SERVER, through libpulse with ctypes, as a real player's stream.

    player.py NAME CONTROL [--corked]

NAME is its application.name. It plays until told otherwise by lines appended
to the file CONTROL: `pause` (cork the stream, as a paused player does), `play`
(uncork), `stop` (end the stream, the process stays) or `exit`. Each state is
printed on its own line once the server confirmed it: `playing <sink input
index>` or `paused <index>` at the start, then `paused`, `playing`, `stopped`.
"""
import ctypes
import os
import sys

pa = ctypes.CDLL("libpulse.so.0")

c_void_p, c_int, c_uint32, c_size_t = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_size_t


class SampleSpec(ctypes.Structure):
    _fields_ = [("format", c_int), ("rate", c_uint32), ("channels", ctypes.c_uint8)]


PA_SAMPLE_S16LE = 3
PA_CONTEXT_READY, PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED = 4, 5, 6
PA_STREAM_READY, PA_STREAM_FAILED = 2, 3
PA_STREAM_START_CORKED = 1
PA_OPERATION_RUNNING = 0

WRITE_CB = ctypes.CFUNCTYPE(None, c_void_p, c_size_t, c_void_p)

pa.pa_mainloop_new.restype = c_void_p
pa.pa_mainloop_get_api.restype = c_void_p
pa.pa_mainloop_get_api.argtypes = [c_void_p]
pa.pa_mainloop_iterate.argtypes = [c_void_p, c_int, c_void_p]
pa.pa_mainloop_prepare.argtypes = [c_void_p, c_int]
pa.pa_mainloop_poll.argtypes = [c_void_p]
pa.pa_mainloop_dispatch.argtypes = [c_void_p]
pa.pa_context_new.restype = c_void_p
pa.pa_context_new.argtypes = [c_void_p, ctypes.c_char_p]
pa.pa_context_connect.argtypes = [c_void_p, ctypes.c_char_p, c_int, c_void_p]
pa.pa_context_get_state.argtypes = [c_void_p]
pa.pa_stream_new.restype = c_void_p
pa.pa_stream_new.argtypes = [c_void_p, ctypes.c_char_p, ctypes.POINTER(SampleSpec), c_void_p]
pa.pa_stream_connect_playback.argtypes = [c_void_p, c_void_p, c_void_p, c_int, c_void_p, c_void_p]
pa.pa_stream_get_state.argtypes = [c_void_p]
pa.pa_stream_get_index.restype = c_uint32
pa.pa_stream_get_index.argtypes = [c_void_p]
pa.pa_stream_set_write_callback.argtypes = [c_void_p, WRITE_CB, c_void_p]
pa.pa_stream_write.argtypes = [c_void_p, c_void_p, c_size_t, c_void_p, ctypes.c_int64, c_int]
pa.pa_stream_cork.restype = c_void_p
pa.pa_stream_cork.argtypes = [c_void_p, c_int, c_void_p, c_void_p]
pa.pa_stream_disconnect.argtypes = [c_void_p]
pa.pa_stream_unref.argtypes = [c_void_p]
pa.pa_operation_get_state.argtypes = [c_void_p]
pa.pa_operation_unref.argtypes = [c_void_p]


def main():
    name, control = sys.argv[1], sys.argv[2]
    corked = "--corked" in sys.argv[3:]
    loop = pa.pa_mainloop_new()

    def turn():
        # At most 50 ms a turn, to read the control file.
        pa.pa_mainloop_prepare(loop, 50000)
        pa.pa_mainloop_poll(loop)
        pa.pa_mainloop_dispatch(loop)

    def say(line):
        print(line, flush=True)

    context = pa.pa_context_new(pa.pa_mainloop_get_api(loop), name.encode())
    if pa.pa_context_connect(context, None, 1, None) < 0:
        sys.exit("cannot connect")
    while pa.pa_context_get_state(context) != PA_CONTEXT_READY:
        if pa.pa_context_get_state(context) in (PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED):
            sys.exit("the connection failed")
        turn()

    spec = SampleSpec(PA_SAMPLE_S16LE, 8000, 1)
    stream = pa.pa_stream_new(context, b"test tone", ctypes.byref(spec), None)
    silence = ctypes.create_string_buffer(65536)

    @WRITE_CB
    def write(s, nbytes, userdata):
        while nbytes > 0:
            n = min(nbytes, len(silence))
            pa.pa_stream_write(s, silence, n, None, 0, 0)
            nbytes -= n

    pa.pa_stream_set_write_callback(stream, write, None)
    pa.pa_stream_connect_playback(stream, None, None, PA_STREAM_START_CORKED if corked else 0, None, None)
    while pa.pa_stream_get_state(stream) != PA_STREAM_READY:
        if pa.pa_stream_get_state(stream) == PA_STREAM_FAILED:
            sys.exit("the stream failed")
        turn()
    index = pa.pa_stream_get_index(stream)
    say(f"{'paused' if corked else 'playing'} {index}")

    def cork(b):
        op = pa.pa_stream_cork(stream, b, None, None)
        while pa.pa_operation_get_state(op) == PA_OPERATION_RUNNING:
            turn()
        pa.pa_operation_unref(op)

    done = 0
    while True:
        turn()
        try:
            with open(control) as f:
                lines = f.read().split("\n")[:-1]
        except FileNotFoundError:
            lines = []
        for command in lines[done:]:
            done += 1
            if command == "pause":
                cork(1)
                say("paused")
            elif command == "play":
                cork(0)
                say("playing")
            elif command == "stop" and stream:
                pa.pa_stream_disconnect(stream)
                pa.pa_stream_unref(stream)
                stream = None
                turn()
                say("stopped")
            elif command == "exit":
                return


if __name__ == "__main__":
    main()
