import { render } from 'preact';
import { App } from './app.js';
import './styles.css';
import './views.css';
import './detail.css';
import './channels.css';
import './keys.css';
import './usage.css';

render(<App />, document.getElementById('app')!);
