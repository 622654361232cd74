// `kiln image`, `kiln tasks list|get|wait|content` and `kiln videos list`.
import type { Command } from 'commander';
import { chunk, type BatchItem, type ImageTask, imagesOf, isUnfinished } from '../client/index.js';
import { Ctx, EXIT, ExitCode, integer } from './context.js';
import { createOptions, createSubmit, printSubmitted, taskTimingLines } from './features-commands.js';
import { progressDisplay } from './progress.js';

const UNCERTAIN_DEFAULT = 'the request may have reached the generator, but its result cannot be confirmed';

type Make = (cmd: Command) => Ctx;

const collect = (v: string, prev: string[] = []) => [...prev, v];

/** Exit code of a finished image task (or batch item). */
export function outcomeCode(status: string): number {
  if (status === 'succeeded') return EXIT.ok;
  if (status === 'uncertain') return EXIT.uncertain;
  return isUnfinished(status) ? EXIT.timeout : EXIT.failed;
}

function describe(t: ImageTask | BatchItem): string {
  if (t.status === 'failed' || t.status === 'not_found')
    return `task ${t.id} ${t.status}: ${t.error?.code ?? 'error'}: ${t.error?.message ?? ''}`;
  if (t.status === 'uncertain')
    return `task ${t.id} is uncertain: ${t.uncertain_reason ?? UNCERTAIN_DEFAULT}. ` + `Check before resubmitting.`;
  return `task ${t.id} ${t.status}`;
}

/** Downloads a succeeded task's images into DIR; returns the paths. */
async function saveImages(ctx: Ctx, task: ImageTask, dir: string): Promise<string[]> {
  const images = imagesOf(task);
  const files: string[] = [];
  for (const [i, img] of images.entries()) {
    const base = images.length > 1 ? `${task.id}-${i + 1}` : task.id;
    if (img.kind === 'url') {
      const { bytes, contentType } = await ctx.kiln.download(img.url, { signal: ctx.abort.signal });
      files.push(ctx.save(dir, base, bytes, contentType ?? img.mimeType ?? null, img.url, 'png'));
    } else {
      files.push(ctx.save(dir, base, img.data, img.mimeType, undefined, 'png'));
    }
  }
  return files;
}

async function finish(ctx: Ctx, task: ImageTask, dir: string | undefined): Promise<number> {
  const code = outcomeCode(task.status);
  for (const line of taskTimingLines(task)) ctx.note(line);
  if (code !== EXIT.ok) {
    ctx.out({ task });
    if (!ctx.json) process.stderr.write(`${describe(task)}\n`);
    return code;
  }
  if (dir === undefined) {
    ctx.out({ task });
    ctx.say(
      imagesOf(task)
        .map((i) => (i.kind === 'url' ? i.url : `(base64 ${i.mimeType}, ${i.data.length} bytes)`))
        .join('\n'),
    );
    return code;
  }
  const files = await saveImages(ctx, task, dir);
  ctx.out({ task, files });
  ctx.say(files.join('\n'));
  return code;
}

export function registerTaskCommands(program: Command, make: Make): void {
  const image = program
    .command('image')
    .description('generate an image: submit a task, wait by the polling guidance, download the images')
    .argument('<prompt>', 'what to draw (at most 4000 characters)')
    .option('-m, --model <id>', 'image model (default: the first image model of GET /v1/models)')
    .option('--aspect <w:h>', 'aspect ratio, e.g. 16:9')
    .option('--size <label>', 'image size label, e.g. 2K')
    .option('--ref <url>', 'reference image URL (public http/https; repeatable, at most 8)', collect)
    .option('--system <text>', 'system instruction')
    .option('-o, --out <dir>', 'where to save the images', '.');
  createOptions(image, { request: 'prompt', task: 'task', id: 'task' }).action(
    async (prompt: string, o, cmd: Command) => {
      const ctx = make(cmd);
      const submit = createSubmit(ctx, o);
      const model = await ctx.defaultModel('image', o.model);
      const params = { model, prompt, aspectRatio: o.aspect, imageSize: o.size, references: o.ref, system: o.system };
      if (!o.wait) return printSubmitted(ctx, await ctx.kiln.tasks.create(params, submit));
      const progress = progressDisplay('image', !ctx.quiet);
      try {
        const task = await ctx.kiln.tasks.createAndWait(params, {
          ...submit,
          onSubmitted: (t) => {
            progress.submitted(t.id);
            ctx.waiting = t.id;
          },
          onProgress: (p) => progress.update(p),
        });
        progress.stop();
        throw new ExitCode(await finish(ctx, task, o.out));
      } finally {
        progress.stop();
      }
    },
  );

  const tasks = program.command('tasks').description('list, inspect, wait for and fetch image tasks');

  tasks
    .command('list')
    .description('recent tasks, newest first')
    .option('--days <n>', 'look-back window, 1-3', integer('--days'))
    .option('--limit <n>', 'items per page, 1-100', integer('--limit'))
    .option('--all', 'follow the cursor through every page')
    .action(async (o, cmd: Command) => {
      const ctx = make(cmd);
      const params = { days: o.days, limit: o.limit };
      const items = [];
      if (o.all) for await (const t of ctx.kiln.tasks.list(params, { signal: ctx.abort.signal })) items.push(t);
      else items.push(...(await ctx.kiln.tasks.listPage(params, { signal: ctx.abort.signal })).items);
      ctx.out(items);
      const time = (s: number | null) => (s ? new Date(s * 1000).toISOString().replace('.000Z', 'Z') : '-');
      for (const t of items)
        ctx.say(
          `${t.id}  ${t.status.padEnd(9)}  ${t.model}  created ${time(t.created_at)}  finished ${time(t.finished_at)}`,
        );
    });

  program
    .command('videos')
    .description('video tasks')
    .command('list')
    .description('recent video tasks (GET /v1/videos), newest first')
    .option('--limit <n>', 'videos per page, 1-100', integer('--limit'))
    .option('--after <id>', 'start after this video (the last id of the previous page)')
    .option('--all', 'follow the cursor through every page')
    .action(async (o, cmd: Command) => {
      const ctx = make(cmd);
      const params = { limit: o.limit, after: o.after };
      const signal = ctx.abort.signal;
      const items = [];
      if (o.all) for await (const v of ctx.kiln.videos.list(params, { signal })) items.push(v);
      else items.push(...(await ctx.kiln.videos.listPage(params, { signal })).data);
      ctx.out(items);
      const time = (s?: number | null) => (s ? new Date(s * 1000).toISOString().replace('.000Z', 'Z') : '-');
      for (const v of items)
        ctx.say(`${v.id}  ${v.status.padEnd(11)}  ${v.model}  created ${time(v.created_at)}  ${v.seconds} s ${v.size}`);
    });

  tasks
    .command('get')
    .description('one task (GET /v1/tasks/{id}); several ids use batch-get, 100 per request')
    .argument('<ids...>', 'task ids')
    .action(async (ids: string[], _o, cmd: Command) => {
      const ctx = make(cmd);
      if (ids.length === 1) {
        const t = await ctx.kiln.tasks.get(ids[0], { signal: ctx.abort.signal });
        ctx.out(t);
        ctx.say(describe(t));
        for (const line of taskTimingLines(t)) ctx.say(`  ${line}`);
        for (const url of imagesOf(t).flatMap((i) => (i.kind === 'url' ? [i.url] : []))) ctx.say(`  ${url}`);
        return;
      }
      const items: BatchItem[] = [];
      for (const batch of chunk(ids, ctx.kiln.polling.batchSize))
        items.push(...(await ctx.kiln.tasks.batchGet(batch, { signal: ctx.abort.signal })).items);
      ctx.out(items);
      for (const t of items) ctx.say(describe(t));
    });

  tasks
    .command('wait')
    .description('wait for tasks to finish (a refresh now, then the polling guidance); download with --out')
    .argument('<ids...>', 'task ids')
    .option('-o, --out <dir>', 'save the images of succeeded tasks here')
    .action(async (ids: string[], o, cmd: Command) => {
      const ctx = make(cmd);
      const kiln = ctx.kiln;
      const progress = progressDisplay('waiting for', !ctx.quiet);
      try {
        if (ids.length === 1) {
          // A manual refresh first; then wait at least the interval, or until 50 s after submit.
          const t = await kiln.tasks.get(ids[0], { signal: ctx.abort.signal });
          progress.submitted(t.id);
          ctx.waiting = t.id;
          const sinceSubmit = t.created_at ? t.created_at * 1000 + kiln.polling.firstCheckMs - Date.now() : 0;
          const final = isUnfinished(t.status)
            ? await kiln.tasks.wait(t.id, {
                signal: ctx.abort.signal,
                firstDelayMs: Math.max(kiln.polling.intervalMs, t.retryAfterMs ?? 0, sinceSubmit),
                onProgress: (p) => progress.update(p),
              })
            : t;
          progress.stop();
          throw new ExitCode(await finish(ctx, final, o.out));
        }
        ctx.waiting = ids[0];
        const results = await kiln.tasks.waitMany(ids, {
          signal: ctx.abort.signal,
          firstDelayMs: 0,
          onProgress: (p) => progress.update(p),
        });
        progress.stop();
        let code = 0;
        const files: Record<string, string[]> = {};
        for (const t of results.values()) {
          code = Math.max(code, outcomeCode(t.status));
          if (!ctx.json) process.stderr.write(`${describe(t)}\n`);
          if (t.status === 'succeeded' && o.out) files[t.id] = await saveImages(ctx, t as ImageTask, o.out);
        }
        ctx.out({ items: [...results.values()], ...(o.out ? { files } : {}) });
        for (const list of Object.values(files)) ctx.say(list.join('\n'));
        throw new ExitCode(code);
      } finally {
        progress.stop();
      }
    });

  tasks
    .command('content')
    .description("the first image's URL (the content redirect); with --out, download it")
    .argument('<id>', 'task id')
    .option('-o, --out <dir>', 'save the image here')
    .action(async (id: string, o, cmd: Command) => {
      const ctx = make(cmd);
      const url = await ctx.kiln.tasks.content(id, { signal: ctx.abort.signal });
      if (!o.out) {
        ctx.out({ id, url });
        ctx.say(url);
        return;
      }
      const { bytes, contentType } = await ctx.kiln.download(url, { signal: ctx.abort.signal });
      const file = ctx.save(o.out, id, bytes, contentType, url, 'png');
      ctx.out({ id, url, file });
      ctx.say(file);
    });
}
