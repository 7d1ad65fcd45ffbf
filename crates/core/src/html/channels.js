// goodput page renderer, part 4: reasoning models, tool calls, agentic sessions, prefix reuse and
// audio (the step's `reasoning`, `tool_calls`, `sessions`, `prefix_reuse` and `audio`): the key figures as
// cards, then every figure of the section as a table.

function ms(v) { return isNum(v) ? fmt(v, 1) + " ms" : "–"; }
function channelBox(title, id, what, value, list) {
  var box = section(title, id, what);
  cards(box, list);
  box.appendChild(h("h3", {}, ["All figures"]));
  box.appendChild(flatTable(value));
}
function reasoningSection(r) {
  var t = r.time_to_first_answer_ms || {}, thinking = r.thinking_ms || {};
  var list = [
    { label: "time to first answer token p50", value: ms(t.p50), note: "p99 " + ms(t.p99) + " · from the scheduled send" },
    { label: "thinking time p50", value: ms(thinking.p50), note: "first answer token − first token" },
    { label: "reasoning tokens/s", value: fmt(r.reasoning_tokens_per_sec, 1), note: fmt(r.reasoning_tokens_total) + " reasoning tokens" },
    { label: "answer tokens/s", value: fmt(r.answer_tokens_per_sec, 1), note: fmt(r.answer_tokens_total) + " answer tokens" },
    { label: "requests that reasoned", value: fmt(r.requests_with_reasoning), note: fmt(r.reasoning_from_usage) + " counted by the server's usage" }];
  var starved = r.empty_answers + r.truncated_answers;
  list.push({ label: "answers starved by thinking", value: fmt(starved), cls: starved > 0 ? "fail" : "pass",
    note: fmt(r.empty_answers) + " empty, " + fmt(r.truncated_answers) + " cut at max_tokens" });
  channelBox("Reasoning", "reasoning", "Reasoning tokens against answer tokens, and the time spent thinking before the first answer token (TTFT counts reasoning; TTFAT does not).", r, list);
}
function toolCallsSection(t) {
  var first = t.time_to_first_tool_call_ms || {};
  channelBox("Tool calls", "tool-calls", "How many answers called a tool, how they ended, and how soon the first tool-call token came.", t, [
    { label: "requests calling a tool", value: fmt(t.requests_with_tool_calls), note: fmt(t.tool_calls) + " calls, " + fmt(t.tool_call_tokens_total) + " tokens" },
    { label: "ended in a tool call", value: fmt(t.ended_in_tool_call), note: fmt(t.ended_in_text) + " ended in text" },
    { label: "time to first tool call p50", value: ms(first.p50), note: "p99 " + ms(first.p99) }]);
}
function sessionsSection(s) {
  var d = s.session_duration_ms || {}, ctx = s.final_context_tokens || {};
  channelBox("Sessions", "sessions", "Multi-turn and agentic sessions: turns, tool results fed back, session duration and how long the context grew.", s, [
    { label: "sessions", value: fmt(s.sessions), note: fmt(s.sessions_without_failure) + " without a failed turn" },
    { label: "turns", value: fmt(s.turns), note: fmt(s.tool_result_turns) + " tool results · " + fmt(get(s, "turns_per_session.mean"), 1) + " per session" },
    { label: "session duration p50", value: ms(d.p50), note: "p99 " + ms(d.p99) },
    { label: "final context", value: fmt(ctx.max) + " tokens", note: "max; mean " + fmt(ctx.mean, 0) }]);
}
function prefixSection(p) {
  channelBox("Prefix reuse", "prefix-reuse", "The prompt tokens the workload expected a prefix cache could serve, beside those the server reported cached: whether the cache did its job.", p, [
    { label: "expected shareable", value: pct(p.expected_shareable_fraction), note: fmt(p.expected_shareable_tokens_total) + " of " + fmt(p.expected_input_tokens_total) + " prompt tokens" },
    { label: "reported cached", value: pct(p.cached_fraction), note: p.requests_reporting_cached > 0
      ? fmt(p.cached_tokens_total) + " of " + fmt(p.reported_input_tokens_total) + " tokens (" + fmt(p.requests_reporting_cached) + " requests)"
      : "the server reported no cached tokens" }]);
}
function audioSection(a) {
  var rtf = a.real_time_factor || {};
  var list = [{ label: "real-time factor p50", value: fmt(rtf.p50, 3), note: "p95 " + fmt(rtf.p95, 3) + " · p99 " + fmt(rtf.p99, 3) + " · E2E from send ÷ audio" }];
  if (a.input_seconds_total > 0) list.push({ label: "audio s processed / s", value: fmt(a.input_seconds_per_sec, 2), note: fmt(a.input_seconds_total, 1) + " s sent" });
  if (a.output_seconds_total > 0) list.push({ label: "audio s produced / s", value: fmt(a.output_seconds_per_sec, 2), note: fmt(a.output_seconds_total, 1) + " s produced" });
  channelBox("Audio", "audio", "Speech recognition and synthesis: audio seconds sent or produced per second, and the real-time factor (below 1 is faster than real time). Time to first transcript token or audio byte is the TTFT above.", a, list);
}
function channelSections(st) {
  if (st.audio) audioSection(st.audio);
  if (st.reasoning) reasoningSection(st.reasoning);
  if (st.tool_calls) toolCallsSection(st.tool_calls);
  if (st.sessions) sessionsSection(st.sessions);
  if (st.prefix_reuse) prefixSection(st.prefix_reuse);
}
