// `kiln chat` and `kiln video`.
import { readFileSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import {
  chatTextOf,
  imageMimeOf,
  streamText,
  systemMessage,
  userMessage,
  videoUrlsOf,
  type ChatCompletionCreateParams,
  type NodeInfo,
  type Video,
} from '../client/index.js';
import { Ctx, EXIT, ExitCode, integer, UsageError } from './context.js';
import { createOptions, createSubmit, printSubmitted, taskTimingLines } from './features-commands.js';
import { progressDisplay } from './progress.js';

type Make = (cmd: Command) => Ctx;

const collect = (v: string, prev: string[] = []) => [...prev, v];

/** `nodeId:fieldName=value` → a nodeInfoList entry. */
export function parseNode(spec: string): NodeInfo {
  const m = /^([^:=]+):([^=]+)=(.*)$/s.exec(spec);
  if (!m) throw new UsageError(`--node must look like nodeId:fieldName=value, got "${spec}"`);
  return { nodeId: m[1], fieldName: m[2], fieldValue: m[3] };
}

/** A chat image from a file (turned into a data URI) or a data URI as given. */
function chatImage(spec: string): { mimeType: string; bytes: Uint8Array } | string {
  if (spec.startsWith('data:image/')) return spec;
  const mimeType = imageMimeOf(spec);
  if (!mimeType) throw new UsageError(`--image ${spec}: use a .png, .jpg, .jpeg, .webp or .gif file`);
  try {
    return { mimeType, bytes: readFileSync(spec) };
  } catch (err) {
    throw new UsageError(`--image ${spec}: ${(err as Error).message}`);
  }
}

const number =
  (name: string) =>
  (v: string): number => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`${name} must be a number, got "${v}".`);
    return n;
  };

export function registerMediaCommands(program: Command, make: Make): void {
  program
    .command('chat')
    .description('ask a chat model (text and images in, text out)')
    .argument('<text>', 'the message')
    .option('-m, --model <id>', 'chat model (default: the first chat model of GET /v1/models)')
    .option('--image <file>', 'attach an image file (sent as a data URI; repeatable)', collect)
    .option('--system <text>', 'system message')
    .option('--max-tokens <n>', 'maximum output length', integer('--max-tokens'))
    .option('--temperature <x>', 'sampling temperature', number('--temperature'))
    .option('--seed <n>', 'random seed', integer('--seed'))
    .option('--stream', 'print the answer as it arrives (SSE)')
    .action(async (text: string, o, cmd: Command) => {
      const ctx = make(cmd);
      const images = ((o.image as string[] | undefined) ?? []).map(chatImage);
      const params: ChatCompletionCreateParams = {
        model: await ctx.defaultModel('chat', o.model),
        messages: [...(o.system ? [systemMessage(o.system)] : []), userMessage({ text, images })],
        ...(o.maxTokens !== undefined ? { max_tokens: o.maxTokens } : {}),
        ...(o.temperature !== undefined ? { temperature: o.temperature } : {}),
        ...(o.seed !== undefined ? { seed: o.seed } : {}),
      };
      if (o.stream && !ctx.json) {
        for await (const t of streamText(ctx.kiln.chat.completions.stream(params, { signal: ctx.abort.signal })))
          process.stdout.write(t);
        process.stdout.write('\n');
        return;
      }
      const completion = await ctx.kiln.chat.completions.create(params, { signal: ctx.abort.signal });
      ctx.out({ text: chatTextOf(completion), completion });
      ctx.say(chatTextOf(completion));
    });

  const video = program
    .command('video')
    .description('generate a video: create a task, wait by the polling guidance, download it')
    .argument('<prompt>', 'what to film')
    .option('-m, --model <id>', 'video model (default: the first video model of GET /v1/models)')
    .option('--image <url>', 'image-to-video: a public image URL')
    .option('--seconds <s>', 'length; the pro model takes only 10, 15 or 25')
    .option('--size <WxH>', 'size; the pro model takes only 1792x1024 or 1024x1792')
    .option('--node <nodeId:field=value>', 'workflow-node models: set a node field (repeatable)', collect)
    .option('-o, --out <dir>', 'where to save the video', '.');
  createOptions(video, { request: 'request', task: 'video task', id: 'video' }).action(
    async (prompt: string, o, cmd: Command) => {
      const ctx = make(cmd);
      const submit = createSubmit(ctx, o);
      const nodeInfoList = ((o.node as string[] | undefined) ?? []).map(parseNode);
      const params = {
        model: await ctx.defaultModel('video', o.model),
        prompt,
        ...(o.image ? { image: o.image as string } : {}),
        ...(o.seconds ? { seconds: String(o.seconds) } : {}),
        ...(o.size ? { size: o.size as string } : {}),
        ...(nodeInfoList.length ? { nodeInfoList } : {}),
      };
      if (!o.wait) return printSubmitted(ctx, await ctx.kiln.videos.create(params, submit));
      const progress = progressDisplay('video', !ctx.quiet);
      let video: Video;
      try {
        video = await ctx.kiln.videos.createAndWait(params, {
          ...submit,
          onSubmitted: (v) => {
            progress.submitted(v.id);
            ctx.waiting = v.id;
          },
          onProgress: (p) => progress.update(p),
        });
      } finally {
        progress.stop();
      }
      throw new ExitCode(await finishVideo(ctx, video, o.out));
    },
  );
}

async function finishVideo(ctx: Ctx, video: Video, dir: string): Promise<number> {
  for (const line of taskTimingLines(video)) ctx.note(line);
  if (video.status !== 'completed') {
    ctx.out({ video });
    const uncertain = video.error?.code === 'uncertain';
    const why = uncertain
      ? 'may have reached the generator, but its result cannot be confirmed; check before resubmitting'
      : `${video.error?.code ?? 'error'}: ${video.error?.message ?? ''}`;
    if (!ctx.json) process.stderr.write(`video ${video.id} ${uncertain ? 'uncertain' : video.status}: ${why}\n`);
    return uncertain ? EXIT.uncertain : EXIT.failed;
  }
  const files: string[] = [];
  const downloads = await ctx.kiln.videos.download(video, { signal: ctx.abort.signal });
  for (const [i, d] of downloads.entries()) {
    const bytes = new Uint8Array(await d.response.arrayBuffer());
    const base = downloads.length > 1 ? `${video.id}-${i + 1}` : video.id;
    files.push(ctx.save(dir, base, bytes, d.response.headers.get('content-type'), d.url, 'mp4'));
  }
  ctx.out({ video, urls: videoUrlsOf(video), files });
  ctx.say(files.join('\n'));
  return EXIT.ok;
}
