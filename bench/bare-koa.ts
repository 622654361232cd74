// Baseline: a bare Koa handler answering a fixed JSON body of the same size as a task poll.
import Koa from 'koa';

const body = process.env.BARE_BODY ?? '{}';
const app = new Koa();
app.use((ctx) => { ctx.type = 'application/json'; ctx.body = body; });
app.listen(Number(process.env.PORT), '127.0.0.1');
